"""The rooms' layout in Redis: the keys of a room, the Lua script of each store call, and the
JSON of views and questions (:mod:`dashboard.rooms.redis_store` runs them).

A room ``<code>`` is these keys, each with a TTL that the room's activity refreshes:

- ``room:<code>`` (hash): ``active`` (the store's clock when last active), ``version`` and
  ``view`` (JSON), ``question`` (JSON), ``options``, ``number``, ``revealed``, the tally
  ``t0`` … ``t3``, ``presenter`` and ``presenter_seen``;
- ``room:<code>:votes`` (hash): each voter's answer to the current question;
- ``room:<code>:seen`` (sorted set): each viewer by the clock of their last poll (its TTL is
  the room's: a poll is not activity);
- ``room:<code>:lessons`` (hash): the text of each lesson file the presenter loaded, by name;
- ``rooms`` (sorted set, :data:`INDEX_KEY`): every open room's code by the clock of its last
  activity, which bounds their number.

The channel ``room:<code>`` carries ``"<version> <origin>"`` after each change a follower
sees (a view, a question asked, revealed or taken away). Times travel as ``repr`` of the
clock's float and are stored as given (Lua's own number-to-text loses digits).
"""

from __future__ import annotations

import json

from dashboard.rooms.store import MAX_OPTIONS, Poll, Question, View

INDEX_KEY = "rooms"
CHANNEL_PREFIX = "room:"


def room_keys(code: str) -> list[str]:
    """The KEYS of every script for room ``code``: its hash, votes, viewers, the index and
    its lesson files."""
    return [f"room:{code}", f"room:{code}:votes", f"room:{code}:seen", INDEX_KEY] + [
        lessons_key(code)
    ]


def lessons_key(code: str) -> str:
    """The hash of room ``code``'s lesson files."""
    return f"room:{code}:lessons"


def channel(code: str) -> str:
    """Room ``code``'s pub/sub channel."""
    return f"{CHANNEL_PREFIX}{code}"


PRELUDE = """
-- KEYS: the room's hash, votes, viewers, the index, lessons; ARGV 1-8: code, now, ttl in s and ms,
-- the oldest poll that counts as a viewer, the last activity that keeps a room, channel, origin
local room, votes, seen, index, lessons = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local code, now_s, ttl_s, ttl_ms = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seen_since, expired_before, channel, origin = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local now = tonumber(now_s)
local function ended()
  local active = redis.call('HGET', room, 'active')
  if not active then return true end
  if now - tonumber(active) <= ttl_s then return false end
  redis.call('DEL', room, votes, seen, lessons)
  redis.call('ZREM', index, code)
  return true
end
local function touch()
  redis.call('HSET', room, 'active', now_s)
  redis.call('ZADD', index, now_s, code)
  for _, key in ipairs({room, votes, seen, index, lessons}) do
    redis.call('PEXPIRE', key, ttl_ms)
  end
end
local function notify()
  redis.call('PUBLISH', channel, redis.call('HGET', room, 'version') .. ' ' .. origin)
end
local function snapshot()
  return {'ok', redis.call('HGETALL', room), redis.call('ZCOUNT', seen, seen_since, '+inf')}
end
"""

BODIES = {
    "rooms": """
redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. expired_before)
return {'ok', redis.call('ZCARD', index)}
""",
    "present": """
ended()
redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. expired_before)
if redis.call('EXISTS', room) == 0 then
  local open = redis.call('ZCARD', index)
  if open >= tonumber(ARGV[9]) then return {'rooms', open} end
  redis.call('HSET', room, 'version', 0, 'number', 0, 'revealed', 0, 'presenter', '',
    'presenter_seen', 0)
end
touch()
local session = ARGV[10]
if session ~= '' then
  local current = redis.call('HGET', room, 'presenter')
  if ARGV[11] == '1' or current == '' then
    redis.call('HSET', room, 'presenter', session)
    current = session
  end
  if current == session then redis.call('HSET', room, 'presenter_seen', now_s) end
end
return snapshot()
""",
    "get": """
if ended() then return {'ended'} end
local viewer, most = ARGV[9], tonumber(ARGV[10])
if viewer ~= '' then
  local count = redis.call('ZCARD', seen)
  if count < most or redis.call('ZSCORE', seen, viewer) then
    redis.call('ZADD', seen, now_s, viewer)
    count = redis.call('ZCARD', seen)
  end
  if count >= most then redis.call('ZREMRANGEBYSCORE', seen, '-inf', '(' .. seen_since) end
  local left = redis.call('PTTL', room)
  if left > 0 then redis.call('PEXPIRE', seen, left) end
end
return snapshot()
""",
    "publish": """
if ended() then return {'ended'} end
touch()
if redis.call('HGET', room, 'view') ~= ARGV[9] then
  redis.call('HSET', room, 'view', ARGV[9])
  redis.call('HINCRBY', room, 'version', 1)
  notify()
end
return snapshot()
""",
    "ask": """
if ended() then return {'ended'} end
touch()
redis.call('DEL', votes)
redis.call('HDEL', room, TALLY)
redis.call('HSET', room, 'question', ARGV[9], 'options', ARGV[10], 'revealed', 0)
redis.call('HINCRBY', room, 'number', 1)
notify()
return snapshot()
""",
    "answer": """
if ended() then return {'ended'} end
local voter, choice, most = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[12])
local asked = redis.call('HGET', room, 'question')
local number = redis.call('HGET', room, 'number')
if not asked or number ~= ARGV[11] or redis.call('HGET', room, 'revealed') == '1' then
  return {'closed'}
end
local options = tonumber(redis.call('HGET', room, 'options'))
if choice < 0 or choice >= options then return {'choice', options} end
local before = redis.call('HGET', votes, voter)
if before then
  redis.call('HINCRBY', room, 't' .. before, -1)
else
  local answers = redis.call('HLEN', votes)
  if answers >= most then return {'limit', answers} end
end
redis.call('HSET', votes, voter, ARGV[10])
redis.call('HINCRBY', room, 't' .. ARGV[10], 1)
touch()
return snapshot()
""",
    "reveal": """
if ended() then return {'ended'} end
touch()
redis.call('HSET', room, 'revealed', redis.call('HEXISTS', room, 'question'))
notify()
return snapshot()
""",
    "keep_lesson": """
if ended() then return {'ended'} end
local name, most_here, most = ARGV[9], tonumber(ARGV[11]), tonumber(ARGV[12])
if redis.call('HEXISTS', lessons, name) == 0 then
  if redis.call('HLEN', lessons) >= most_here then return {'room'} end
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. expired_before)
  local kept = 0
  for _, other in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    kept = kept + redis.call('HLEN', 'room:' .. other .. ':lessons')
  end
  if kept >= most then return {'server'} end
end
redis.call('HSET', lessons, name, ARGV[10])
touch()
return {'ok'}
""",
    "lesson_text": """
if ended() then return {'ended'} end
if ARGV[9] == '' then return {'ok', redis.call('HGETALL', lessons)} end
local text = redis.call('HGET', lessons, ARGV[9])
if not text then return {'ok', {}} end
return {'ok', {ARGV[9], text}}
""",
    "clear_question": """
if ended() then return {'ended'} end
touch()
redis.call('DEL', votes)
redis.call('HDEL', room, 'question', 'options', TALLY)
redis.call('HSET', room, 'revealed', 0)
notify()
return snapshot()
""",
}
"""The Lua body of each call; each runs after :data:`PRELUDE` (ARGV 1-8 are common to all,
ARGV 9 on are the call's own; ``TALLY`` stands for the tally's fields)."""
TALLY_FIELDS = ", ".join(f"'t{i}'" for i in range(MAX_OPTIONS))


def view_text(view: View) -> str:
    """``view`` as the JSON the hash keeps (the same view gives the same text, which is how
    the publish script tells a change)."""
    return json.dumps([view.page, view.params])


def question_text(question: Question) -> str:
    """``question`` as the JSON the hash keeps."""
    return json.dumps([question.ready, question.text, question.options, question.correct])


def read_view(text: str | None) -> View | None:
    """The view in the hash's ``view`` field, or ``None`` before the first publish."""
    if not text:
        return None
    page, params = json.loads(text)
    return View(page, tuple((key, value) for key, value in params))


def read_poll(fields: dict[str, str]) -> Poll | None:
    """The question and tally in a room's hash fields, or ``None`` when none is asked."""
    if "question" not in fields:
        return None
    ready, text, options, correct = json.loads(fields["question"])
    question = Question(ready, text, tuple(options), correct)
    tally = tuple(int(fields.get(f"t{i}", 0)) for i in range(len(options)))
    return Poll(int(fields["number"]), question, tally, fields["revealed"] == "1")


def script_sources() -> dict[str, str]:
    """Each store call's whole Lua script (the prelude, then its body), by call name."""
    return {name: PRELUDE + body.replace("TALLY", TALLY_FIELDS) for name, body in BODIES.items()}
