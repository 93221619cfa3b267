"""The rooms in Redis: :class:`RoomStore`'s interface for replicas that share one server.

With ``ATTENTION_LAB_REDIS_URL`` set (:mod:`dashboard.rooms.presenter`), every replica of the
app reads and writes the same rooms, so a presenter and a follower may be on different
replicas. Each call is one Lua script on the room's keys (:mod:`dashboard.rooms.redis_scripts`
holds the layout and the scripts), so bounds hold however many replicas write at once.

Times come from the store's clock: wall-clock seconds, which replicas compare (keep their
clocks in step, as NTP does). A room idle for ``ttl_s`` by that clock has ended, and Redis
drops its keys by the TTL its activity refreshes. ``publish`` (when the view changed),
``ask``, ``reveal`` and ``clear_question`` PUBLISH on the channel ``room:<code>``;
:meth:`RedisRoomStore.subscribe` hands the other replicas' changes to its listeners from one
daemon thread, and followers still poll the version when a message is lost.

When Redis cannot be reached every call raises :class:`RoomServerUnreachable` within
:data:`SOCKET_TIMEOUT_S` (a broken connection is retried once, at once), and for
:data:`RETRY_AFTER_S` after a failure without trying again; a Redis that restarted has
forgotten its rooms unless it keeps them on disk (``scripts/serve.py`` runs it with an
append-only file); a forgotten room reads as ended.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dashboard.rooms import redis_scripts as layout
from dashboard.rooms.store import (
    MAX_ANSWERS,
    MAX_LESSONS,
    MAX_ROOM_LESSONS,
    MAX_ROOMS,
    MAX_VIEWERS,
    ROOM_TTL_S,
    VIEWER_WINDOW_S,
    LessonLimitError,
    Question,
    QuestionClosedError,
    RoomEndedError,
    RoomLimitError,
    RoomServerUnreachable,
    RoomSnapshot,
    View,
)

SOCKET_TIMEOUT_S = 0.5
"""Seconds to connect to Redis, or to wait for one reply, before it counts as unreachable."""
RETRIES = 1
"""Immediate retries on a new connection after a connection error (a pooled connection that a
restart broke); a timeout is not retried, so a hung Redis costs one :data:`SOCKET_TIMEOUT_S`."""
RETRY_AFTER_S = 1.0
"""After a failure, calls raise at once for this long instead of waiting on Redis again."""
LISTEN_WAIT_S = 0.25
"""The subscriber thread waits this long for a message before it looks at its stop flag (how
long :meth:`RedisRoomStore.close` may wait for it)."""
RESUBSCRIBE_S = 1.0
"""The subscriber thread retries this often while Redis cannot be reached."""

_LOG = logging.getLogger(__name__)
_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

Listener = Callable[[str, int], None]
"""Called with a room's code and its view's version when another replica changed the room."""


def _check_positive(**values: float) -> None:
    """Check the store's bounds and times.

    Raises:
        ValueError: naming the first of ``values`` that is not a positive number.
    """
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def _closed(pubsub: redis.client.PubSub | None) -> None:
    """Close ``pubsub`` (if any); returns ``None``, the listener's "not subscribed"."""
    if pubsub is not None:
        pubsub.close()


class RedisRoomStore:
    """Every room of every replica, in one Redis: :class:`RoomStore`'s methods and errors.

    Args:
        url: the Redis URL (``redis://host:6379/0``, ``rediss://…`` for TLS).
        max_rooms, max_answers, max_viewers: the bounds (defaults: the module's constants).
        ttl_s: seconds without activity after which a room ends.
        clock: wall-clock seconds, compared across replicas (a test passes its own).
        timeout_s: seconds to connect or wait for a reply before Redis is unreachable.
        retry_after_s: after a failure, calls raise at once for this long.

    Raises:
        ValueError: for a URL redis cannot read, or a bound or time that is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        max_rooms: int = MAX_ROOMS,
        max_answers: int = MAX_ANSWERS,
        max_viewers: int = MAX_VIEWERS,
        max_room_lessons: int = MAX_ROOM_LESSONS,
        max_lessons: int = MAX_LESSONS,
        ttl_s: float = ROOM_TTL_S,
        clock: Callable[[], float] = time.time,
        timeout_s: float = SOCKET_TIMEOUT_S,
        retry_after_s: float = RETRY_AFTER_S,
    ):
        _check_positive(
            max_rooms=max_rooms,
            max_answers=max_answers,
            max_viewers=max_viewers,
            max_room_lessons=max_room_lessons,
            max_lessons=max_lessons,
            ttl_s=ttl_s,
            timeout_s=timeout_s,
        )
        self.max_rooms, self.max_answers, self.max_viewers = max_rooms, max_answers, max_viewers
        self.max_room_lessons, self.max_lessons = max_room_lessons, max_lessons
        self.ttl_s, self._clock, self.retry_after_s = ttl_s, clock, retry_after_s
        self.origin = secrets.token_hex(4)
        self._redis = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), RETRIES, supported_errors=(redis.ConnectionError,)),
        )
        self._scripts = {
            name: self._redis.register_script(source)
            for name, source in layout.script_sources().items()
        }
        self._down_until = 0.0
        self._listeners: list[Listener] = []
        self._on_back: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _call(self, name: str, code: str, *args: object) -> tuple[list, float]:
        """Run script ``name`` on room ``code`` with the call's own ``args``.

        Returns:
            ``(reply, now)``: the script's reply (``reply[0]``, a status) and the clock it
            ran at.

        Raises:
            RoomServerUnreachable: when Redis cannot be reached (or could not just now).
        """
        if time.monotonic() < self._down_until:
            raise RoomServerUnreachable("the room server was unreachable a moment ago")
        now = self._clock()
        common = [code, repr(now), repr(self.ttl_s), max(1, round(self.ttl_s * 1000))]
        common += [repr(now - VIEWER_WINDOW_S), repr(now - self.ttl_s), layout.channel(code)]
        common.append(self.origin)
        try:
            reply = self._scripts[name](
                keys=layout.room_keys(code), args=common + [str(a) for a in args]
            )
        except _UNREACHABLE as err:
            self._down_until = time.monotonic() + self.retry_after_s
            raise RoomServerUnreachable(f"cannot reach the room server: {err}") from err
        return reply, now

    def _snapshot(self, code: str, reply: list, now: float) -> RoomSnapshot:
        """A snapshot from a script's ``{'ok', fields, viewers}`` reply read at ``now``.

        Raises:
            RoomEndedError: for an ``{'ended'}`` reply.
        """
        if reply[0] == "ended":
            raise RoomEndedError(f"room {code!r} is not open on the room server")
        flat, viewers = reply[1], int(reply[2])
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        presenter = fields.get("presenter", "")
        seen_s = now - float(fields["presenter_seen"]) if presenter else 0.0
        view = layout.read_view(fields.get("view"))
        version, poll = int(fields["version"]), layout.read_poll(fields)
        return RoomSnapshot(code, view, version, poll, viewers, presenter, seen_s)

    def rooms(self) -> int:
        """How many rooms are open (after expiry).

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        reply, _now = self._call("rooms", "")
        return int(reply[1])

    def _present(self, code: str, session: str, take_over: bool) -> RoomSnapshot:
        reply, now = self._call("present", code, self.max_rooms, session, int(take_over))
        if reply[0] == "rooms":
            raise RoomLimitError(f"{reply[1]} rooms are open; room {code!r} waits")
        return self._snapshot(code, reply, now)

    def open(self, code: str) -> RoomSnapshot:
        """Open room ``code`` for its presenter (or find it open) and mark it active.

        Raises:
            RoomLimitError: when ``max_rooms`` rooms are open already.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._present(code, "", False)

    def present(self, code: str, session: str, *, take_over: bool) -> RoomSnapshot:
        """Session ``session`` presents room ``code``, opening it if needed; with
        ``take_over`` it becomes the one presenter, without it only says it is still there
        (see :meth:`RoomStore.present`).

        Raises:
            RoomLimitError: when ``max_rooms`` rooms are open already.
            ValueError: for an empty ``session``.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        if not session:
            raise ValueError("a presenter needs a session id, got ''")
        return self._present(code, session, take_over)

    def get(self, code: str, viewer: str = "") -> RoomSnapshot | None:
        """The room ``code`` now, or ``None`` when it is not open; ``viewer`` is counted
        among the room's viewers when given and there is room.

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        try:
            return self._snapshot(code, *self._call("get", code, viewer, self.max_viewers))
        except RoomEndedError:
            return None

    def publish(self, code: str, view: View) -> RoomSnapshot:
        """Make ``view`` the room's view; its version grows (and is PUBLISHed) only when the
        view changed.

        Raises:
            RoomEndedError: when the room is not open.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._snapshot(code, *self._call("publish", code, layout.view_text(view)))

    def ask(self, code: str, question: Question) -> RoomSnapshot:
        """Put ``question`` to the room: earlier answers are dropped, the answer is hidden.

        Raises:
            RoomEndedError: when the room is not open.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        text = layout.question_text(question)
        return self._snapshot(code, *self._call("ask", code, text, len(question.options)))

    def answer(self, code: str, voter: str, choice: int, number: int) -> RoomSnapshot:
        """Record ``voter``'s answer ``choice`` to question ``number`` as
        :meth:`RoomStore.answer <dashboard.rooms.store.RoomStore.answer>` does, with its
        errors (the bound is this store's ``max_answers``).

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        if not isinstance(choice, int) or not isinstance(number, int):
            raise ValueError(f"answer {choice!r} to question {number!r}: both are numbers")
        reply, now = self._call("answer", code, voter, choice, number, self.max_answers)
        if reply[0] == "closed":
            raise QuestionClosedError(f"question {number} of room {code!r} takes no answers now")
        if reply[0] == "choice":
            raise ValueError(f"answer {choice!r} of {reply[1]}")
        if reply[0] == "limit":
            raise RoomLimitError(f"question {number} has {reply[1]} answers")
        return self._snapshot(code, reply, now)

    def reveal(self, code: str) -> RoomSnapshot:
        """Show the current question's right answer and close its answers.

        Raises:
            RoomEndedError: when the room is not open.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._snapshot(code, *self._call("reveal", code))

    def keep_lesson(self, code: str, name: str, text: str) -> None:
        """Keep lesson file ``text`` under ``name`` in room ``code``, for every replica's
        learners of the room (see :meth:`RoomStore.keep_lesson
        <dashboard.rooms.store.RoomStore.keep_lesson>`, with its errors).

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        reply, _now = self._call(
            "keep_lesson", code, name, text, self.max_room_lessons, self.max_lessons
        )
        if reply[0] == "ended":
            raise RoomEndedError(f"room {code!r} is not open on the room server")
        if reply[0] == "room":
            raise LessonLimitError("room", self.max_room_lessons)
        if reply[0] == "server":
            raise LessonLimitError("server", self.max_lessons)

    def lesson_text(self, code: str, name: str) -> str | None:
        """The text of room ``code``'s lesson file ``name``, or ``None``.

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._lessons(code, name).get(name) if name else None

    def lesson_texts(self, code: str) -> dict[str, str]:
        """Room ``code``'s lesson files by name (none when the room is not open).

        Raises:
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._lessons(code, "")

    def _lessons(self, code: str, name: str) -> dict[str, str]:
        """Room ``code``'s lesson file ``name`` (every one for ``""``), by name."""
        reply, _now = self._call("lesson_text", code, name)
        if reply[0] == "ended":
            return {}
        flat = reply[1]
        return dict(zip(flat[::2], flat[1::2], strict=True))

    def clear_question(self, code: str) -> RoomSnapshot:
        """Take the current question away.

        Raises:
            RoomEndedError: when the room is not open.
            RoomServerUnreachable: when Redis cannot be reached.
        """
        return self._snapshot(code, *self._call("clear_question", code))

    def subscribe(self, listener: Listener, *, on_back: Callable[[], None] | None = None) -> None:
        """Call ``listener(code, version)`` whenever another store (another replica) changes
        a room's view or question; this store's own changes are its caller's to announce.
        ``on_back()`` is called each time the subscriber reaches Redis again after an outage
        (what changed meanwhile sent no message: its caller reads the rooms again).

        One daemon thread per store listens on every room's channel; it calls the listeners
        in turn (an exception is logged and the next called), and while Redis cannot be
        reached it tries again every :data:`RESUBSCRIBE_S` seconds. :meth:`close` stops it.
        """
        with self._lock:
            self._listeners.append(listener)
            if on_back is not None:
                self._on_back.append(on_back)
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._listen, name="rooms-redis-subscriber", daemon=True
                )
                self._thread.start()

    def _listen(self) -> None:
        """The subscriber thread: listen until :meth:`close`, subscribing again after an
        outage (said once per outage in the server's log)."""
        pubsub, down = None, False
        while not self._stop.is_set():
            try:
                if pubsub is None:
                    pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                    pubsub.psubscribe(layout.CHANNEL_PREFIX + "*")
                message = pubsub.get_message(timeout=LISTEN_WAIT_S)
            except _UNREACHABLE as err:
                if not down:
                    _LOG.warning("rooms: cannot reach the room server (%s); followers poll", err)
                pubsub, down = _closed(pubsub), True
                self._stop.wait(RESUBSCRIBE_S)
                continue
            if down:
                _LOG.warning("rooms: the room server is back; followers are woken again")
                down = False
                self._back()
            if message is not None:
                self._deliver(message["channel"], message["data"])
        _closed(pubsub)

    def _back(self) -> None:
        """Call each ``on_back`` listener (an exception is logged and the next called)."""
        for on_back in list(self._on_back):
            try:
                on_back()
            except Exception:  # noqa: BLE001 - one listener's failure must not stop the rest
                _LOG.exception("rooms: a listener of the room server's return failed")

    def _deliver(self, channel: str, data: str) -> None:
        """Hand one message (``"<version> <origin>"`` on ``room:<code>``) to the listeners,
        unless this store sent it."""
        version, _, origin = data.partition(" ")
        if origin == self.origin or not version.isdigit():
            return
        code = channel.removeprefix(layout.CHANNEL_PREFIX)
        for listener in list(self._listeners):
            try:
                listener(code, int(version))
            except Exception:  # noqa: BLE001 - one listener's failure must not stop the rest
                _LOG.exception("rooms: a room listener failed")

    def close(self) -> None:
        """Stop the subscriber thread (if any) and close the connections."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(LISTEN_WAIT_S + SOCKET_TIMEOUT_S + 1.0)
        self._redis.close()
