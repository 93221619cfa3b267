"""The rooms of one server process: a thread-safe, bounded, expiring in-memory store.

Every Streamlit session of a server runs in a thread of one process, so one
:class:`RoomStore` there is shared by a presenter and the learners who follow them. A room
holds the presenter's view (page and query values, with a version that grows when it
changes), the question put to the room with one answer per learner, who polled lately, and
who presents: one session at a time (:meth:`RoomStore.present`: the newer takes over) and
when it last said it is there (a presenter whose tab closed is away after
:data:`PRESENTER_AWAY_S`). Callers get frozen snapshots, never the store's own objects.

Limits: a room untouched by its presenter or its learners' answers for :data:`ROOM_TTL_S`
ends; at most :data:`MAX_ROOMS` rooms, :data:`MAX_ANSWERS` answers per question,
:data:`MAX_VIEWERS` counted learners per room, and :data:`MAX_ROOM_LESSONS` lesson files per
room (:data:`MAX_LESSONS` in all: a presenter's uploads, which belong to their room and end
with it, :meth:`RoomStore.keep_lesson`). A server restart ends every room (nothing is
written to disk).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

ROOM_TTL_S = 4 * 3600.0
MAX_ROOMS = 100
MAX_ANSWERS = 500
MAX_VIEWERS = 1000
VIEWER_WINDOW_S = 15.0  # three of a follower's polls (room_follow.POLL_S)
MAX_PARAMS = 64
MAX_PARAM_LEN = 2000
MIN_OPTIONS, MAX_OPTIONS = 2, 4
PRESENTER_AWAY_S = 15.0  # three of the presenter's heartbeats (room_controls.PRESENCE_S)
MAX_ROOM_LESSONS = 8
MAX_LESSONS = 64


class RoomLimitError(RuntimeError):
    """A new room, answer or viewer would pass the store's bounds."""


class LessonLimitError(RoomLimitError):
    """A new lesson file would pass the room's bound (``scope`` ``"room"``) or the server's
    (``"server"``); ``limit`` is that bound."""

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"the {scope} keeps {limit} lesson files already")
        self.scope, self.limit = scope, limit


class QuestionClosedError(ValueError):
    """An answer to a question that no longer takes answers (revealed, taken away, replaced)."""


class RoomEndedError(LookupError):
    """The room does not exist in this process (never opened, expired, or a restart)."""


class RoomServerUnreachable(RuntimeError):
    """The server where the rooms live (Redis, for replicas) cannot be reached now (down,
    restarting, or too slow); the in-process store never raises it."""


@dataclass(frozen=True)
class View:
    """What a presenter shows: a page name and its query values (no language, no room keys).

    Attributes:
        page: a page's file stem (``"scaling"``).
        params: ``(key, value)`` pairs, sorted by key.
    """

    page: str
    params: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, page: str, params: dict[str, str]) -> View:
        """A view from a page and a dict of query values.

        Raises:
            ValueError: when there are more than :data:`MAX_PARAMS` values or one is longer
                than :data:`MAX_PARAM_LEN` characters.
        """
        if len(params) > MAX_PARAMS:
            raise ValueError(f"a view of {len(params)} values; at most {MAX_PARAMS}")
        for key, value in params.items():
            if len(key) + len(value) > MAX_PARAM_LEN:
                raise ValueError(f"view value {key[:40]!r} is longer than {MAX_PARAM_LEN}")
        return cls(page, tuple(sorted((str(k), str(v)) for k, v in params.items())))


@dataclass(frozen=True)
class Question:
    """A question put to the room: a page's ready question or one typed on the spot.

    Attributes:
        ready: the id of a ready question (its text and answers come from the locale, so
            each learner reads it in their own language), or ``""`` for a typed one.
        text: the typed question (``""`` for a ready one).
        options: the typed answers, or the ready question's answer count as ``("", …)``.
        correct: the index of the right answer, or ``None`` for a poll without one.
    """

    ready: str
    text: str
    options: tuple[str, ...]
    correct: int | None

    def __post_init__(self) -> None:
        if not MIN_OPTIONS <= len(self.options) <= MAX_OPTIONS:
            raise ValueError(
                f"a question with {len(self.options)} answers; {MIN_OPTIONS} to {MAX_OPTIONS}"
            )
        if self.correct is not None and not 0 <= self.correct < len(self.options):
            raise ValueError(f"right answer {self.correct} of {len(self.options)} answers")


@dataclass(frozen=True)
class Poll:
    """A question and its answers so far.

    Attributes:
        number: counts the questions asked in the room (1, 2, …).
        question: what was asked.
        tally: answers per option.
        revealed: the presenter has shown the right answer.
    """

    number: int
    question: Question
    tally: tuple[int, ...]
    revealed: bool

    @property
    def answers(self) -> int:
        """How many learners answered."""
        return sum(self.tally)


@dataclass(frozen=True)
class RoomSnapshot:
    """A room as it was when read.

    Attributes:
        code: the room's code.
        view: the presenter's last view, or ``None`` before they published one.
        version: grows by one each time the view changes (0: no view yet).
        poll: the current question, or ``None``.
        viewers: learners who polled within :data:`VIEWER_WINDOW_S`.
        presenter: the session that presents now (``""``: none yet).
        presenter_seen_s: seconds since that session last said it is there (0.0 with no
            presenter).
    """

    code: str
    view: View | None
    version: int
    poll: Poll | None
    viewers: int
    presenter: str = ""
    presenter_seen_s: float = 0.0

    @property
    def presenter_away(self) -> bool:
        """Whether the room's presenter has not been seen for :data:`PRESENTER_AWAY_S`."""
        return bool(self.presenter) and self.presenter_seen_s > PRESENTER_AWAY_S


@dataclass
class _Room:
    code: str
    active: float
    view: View | None = None
    version: int = 0
    question: Question | None = None
    number: int = 0
    votes: dict[str, int] = field(default_factory=dict)
    revealed: bool = False
    seen: dict[str, float] = field(default_factory=dict)
    presenter: str = ""
    presenter_seen: float = 0.0
    lessons: dict[str, str] = field(default_factory=dict)


class RoomStore:
    """Every room of this process, behind one lock.

    Args:
        max_rooms, max_answers, max_viewers, max_room_lessons, max_lessons: the bounds
            (defaults: the module's constants).
        ttl_s: seconds without activity after which a room ends.
        clock: monotonic seconds (a test passes its own).
    """

    def __init__(
        self,
        *,
        max_rooms: int = MAX_ROOMS,
        max_answers: int = MAX_ANSWERS,
        max_viewers: int = MAX_VIEWERS,
        max_room_lessons: int = MAX_ROOM_LESSONS,
        max_lessons: int = MAX_LESSONS,
        ttl_s: float = ROOM_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.max_rooms, self.max_answers, self.max_viewers = max_rooms, max_answers, max_viewers
        self.max_room_lessons, self.max_lessons = max_room_lessons, max_lessons
        self.ttl_s, self._clock = ttl_s, clock
        self._rooms: dict[str, _Room] = {}
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        for code in [c for c, room in self._rooms.items() if now - room.active > self.ttl_s]:
            del self._rooms[code]

    def _room(self, code: str) -> _Room:
        now = self._clock()
        self._expire(now)
        room = self._rooms.get(code)
        if room is None:
            raise RoomEndedError(f"room {code!r} is not open on this server")
        return room

    def _snapshot(self, room: _Room, now: float) -> RoomSnapshot:
        poll = None
        if room.question is not None:
            tally = [0] * len(room.question.options)
            for choice in room.votes.values():
                tally[choice] += 1
            poll = Poll(room.number, room.question, tuple(tally), room.revealed)
        viewers = sum(1 for seen in room.seen.values() if now - seen <= VIEWER_WINDOW_S)
        seen_s = now - room.presenter_seen if room.presenter else 0.0
        return RoomSnapshot(
            room.code, room.view, room.version, poll, viewers, room.presenter, seen_s
        )

    def _touch(self, room: _Room) -> RoomSnapshot:
        """Mark ``room`` active now (after a change); its snapshot."""
        now = room.active = self._clock()
        return self._snapshot(room, now)

    def rooms(self) -> int:
        """How many rooms are open (after expiry)."""
        with self._lock:
            self._expire(self._clock())
            return len(self._rooms)

    def _opened(self, code: str, now: float) -> _Room:
        self._expire(now)
        room = self._rooms.get(code)
        if room is None:
            if len(self._rooms) >= self.max_rooms:
                raise RoomLimitError(f"{len(self._rooms)} rooms are open; room {code!r} waits")
            room = self._rooms[code] = _Room(code, now)
        room.active = now
        return room

    def open(self, code: str) -> RoomSnapshot:
        """Open room ``code`` for its presenter (or find it open) and mark it active.

        Raises:
            RoomLimitError: when :data:`MAX_ROOMS` rooms are open already.
        """
        with self._lock:
            now = self._clock()
            return self._snapshot(self._opened(code, now), now)

    def present(self, code: str, session: str, *, take_over: bool) -> RoomSnapshot:
        """Session ``session`` (which typed the key) presents room ``code``, opening it if
        needed: with ``take_over`` it becomes the room's one presenter (a newer tab takes the
        room from an older one); without, it only says it is still there, which counts only
        while it is the presenter (an older tab never takes the room back by itself). Read
        the snapshot's ``presenter`` to know who presents.

        Raises:
            RoomLimitError: when :data:`MAX_ROOMS` rooms are open already.
            ValueError: for an empty ``session``.
        """
        if not session:
            raise ValueError("a presenter needs a session id, got ''")
        with self._lock:
            now = self._clock()
            room = self._opened(code, now)
            if take_over or not room.presenter:
                room.presenter = session
            if room.presenter == session:
                room.presenter_seen = now
            return self._snapshot(room, now)

    def get(self, code: str, viewer: str = "") -> RoomSnapshot | None:
        """The room ``code`` now, or ``None`` when it is not open; ``viewer`` (a learner's
        session id) is counted among the room's viewers when given and room is left."""
        with self._lock:
            try:
                room = self._room(code)
            except RoomEndedError:
                return None
            now = self._clock()
            if viewer and (viewer in room.seen or len(room.seen) < self.max_viewers):
                room.seen[viewer] = now
            if len(room.seen) >= self.max_viewers:
                room.seen = {v: s for v, s in room.seen.items() if now - s <= VIEWER_WINDOW_S}
            return self._snapshot(room, now)

    def publish(self, code: str, view: View) -> RoomSnapshot:
        """Make ``view`` the room's view; its version grows only when the view changed.

        Raises:
            RoomEndedError: when the room is not open.
        """
        with self._lock:
            room = self._room(code)
            if view != room.view:
                room.view, room.version = view, room.version + 1
            return self._touch(room)

    def ask(self, code: str, question: Question) -> RoomSnapshot:
        """Put ``question`` to the room: earlier answers are dropped, the answer is hidden.

        Raises:
            RoomEndedError: when the room is not open.
        """
        with self._lock:
            room = self._room(code)
            room.question, room.number = question, room.number + 1
            room.votes, room.revealed = {}, False
            return self._touch(room)

    def answer(self, code: str, voter: str, choice: int, number: int) -> RoomSnapshot:
        """Record ``voter``'s answer ``choice`` to question ``number`` (a second answer
        replaces the first; after the reveal answers are closed).

        Raises:
            RoomEndedError: when the room is not open.
            QuestionClosedError: (a ``ValueError``) when question ``number`` is no longer
                asked or its answer is shown.
            ValueError: when ``choice`` is not one of its answers.
            RoomLimitError: when :data:`MAX_ANSWERS` learners answered already.
        """
        with self._lock:
            room = self._room(code)
            if room.question is None or room.number != number or room.revealed:
                raise QuestionClosedError(
                    f"question {number} of room {code!r} takes no answers now"
                )
            if not 0 <= choice < len(room.question.options):
                raise ValueError(f"answer {choice!r} of {len(room.question.options)}")
            if voter not in room.votes and len(room.votes) >= self.max_answers:
                raise RoomLimitError(f"question {number} has {len(room.votes)} answers")
            room.votes[voter] = choice
            return self._touch(room)

    def reveal(self, code: str) -> RoomSnapshot:
        """Show the current question's right answer and close its answers.

        Raises:
            RoomEndedError: when the room is not open.
        """
        with self._lock:
            room = self._room(code)
            room.revealed = room.question is not None
            return self._touch(room)

    def clear_question(self, code: str) -> RoomSnapshot:
        """Take the current question away.

        Raises:
            RoomEndedError: when the room is not open.
        """
        with self._lock:
            room = self._room(code)
            room.question, room.votes, room.revealed = None, {}, False
            return self._touch(room)

    def keep_lesson(self, code: str, name: str, text: str) -> None:
        """Keep lesson file ``text`` under ``name`` in room ``code`` (replacing the room's
        own file of that name), for every learner of the room; it ends with the room.

        Raises:
            RoomEndedError: when the room is not open.
            LessonLimitError: when the room keeps ``max_room_lessons`` other files, or the
                open rooms ``max_lessons`` in all.
        """
        with self._lock:
            room = self._room(code)
            if name not in room.lessons:
                if len(room.lessons) >= self.max_room_lessons:
                    raise LessonLimitError("room", self.max_room_lessons)
                if sum(len(r.lessons) for r in self._rooms.values()) >= self.max_lessons:
                    raise LessonLimitError("server", self.max_lessons)
            room.lessons[name] = text
            self._touch(room)

    def lesson_text(self, code: str, name: str) -> str | None:
        """The text of room ``code``'s lesson file ``name``, or ``None`` (no such file, or
        the room is not open)."""
        with self._lock:
            try:
                return self._room(code).lessons.get(name)
            except RoomEndedError:
                return None

    def lesson_texts(self, code: str) -> dict[str, str]:
        """Room ``code``'s lesson files by name, in the order kept (none when not open)."""
        with self._lock:
            try:
                return dict(self._room(code).lessons)
            except RoomEndedError:
                return {}
