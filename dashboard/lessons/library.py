"""Where the lab's lessons come from, each checked by :func:`dashboard.lessons.model.
parse_lesson` when read:

* the shipped files (:func:`~dashboard.lessons.model.shipped_lessons`);
* a folder the server's operator names: ``ATTENTION_LAB_LESSONS_DIR``, else the secret
  ``lessons_dir`` (never a path from a link); its ``*.toml`` files are read again when one of
  them changes, and a file that cannot be used is left out with its whole reason, said once
  per change in the server's log (:func:`folder_lessons`, :func:`folder_left_out`);
* a file a presenter loads (an upload, or one made in the lab, :mod:`dashboard.lesson_author`):
  it belongs to the presenter's room. The room keeps the file's text
  (:meth:`~dashboard.rooms.store.RoomStore.keep_lesson`: in this process, or in Redis for
  every replica), so that the room's learners on any replica open it, and no one outside the
  room does; it ends with the room. It is never written into the operator's folder, and a
  name the folder has is refused (:func:`load_lesson`); a room keeps at most
  :data:`~dashboard.rooms.store.MAX_ROOM_LESSONS` files, the server
  :data:`~dashboard.rooms.store.MAX_LESSONS`.

A lesson's name is its file's stem; a shipped name always means the shipped lesson, and a
folder's file the operator's (a folder's or loaded file of a shipped name is refused).
Text from any lesson but a shipped one is shown as plain text (:func:`is_shipped`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from dashboard.i18n import t
from dashboard.lessons.model import Lesson, LessonError, parse_lesson, shipped_lessons

DIR_ENV = "ATTENTION_LAB_LESSONS_DIR"
DIR_SECRET = "lessons_dir"
MAX_FILE_BYTES = 64 * 1024
"""The largest lesson file read (a 30-step lesson in two languages is about 20 KB)."""
_LOG = logging.getLogger(__name__)


def lessons_dir(
    environ: Mapping[str, str] = os.environ, read_secret: Callable[[], str | None] | None = None
) -> Path | None:
    """The lessons folder the operator named (the environment's :data:`DIR_ENV`, else the
    secret :data:`DIR_SECRET`), or ``None``."""
    if read_secret is None:
        from dashboard.rooms.presenter import secret_named

        read_secret = functools.partial(secret_named, DIR_SECRET)
    for value in (environ.get(DIR_ENV), read_secret()):
        if value is not None and str(value).strip():
            return Path(str(value).strip()).expanduser()
    return None


def read_lesson_file(data: bytes, filename: str) -> Lesson:
    """A lesson file's bytes, checked: its name is the file's stem.

    Args:
        data: the file's bytes (UTF-8 TOML, at most :data:`MAX_FILE_BYTES`).
        filename: the file's name, ``<name>.toml``.

    Raises:
        LessonError: naming the file (and the step and field) for anything it cannot use,
            and for a name that a shipped lesson has.
    """
    stem, dot, suffix = filename.rpartition(".")
    if not dot or suffix.lower() != "toml":
        raise LessonError(f"{filename}: a lesson file's name ends in .toml")
    if len(data) > MAX_FILE_BYTES:
        raise LessonError(f"{filename}: {len(data):,} bytes; a lesson file has at most 64 KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LessonError(f"{filename}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    if stem in shipped_lessons():
        raise LessonError(f"{filename}: {stem!r} is a shipped lesson's name; rename the file")
    return parse_lesson(text, stem, filename)


@functools.lru_cache(maxsize=4)
def _read_folder(folder: Path, signature: tuple) -> tuple[dict[str, Lesson], dict[str, str]]:
    """The folder's lessons and, by file stem, the reason for each file left out
    (``signature``: the files' names, sizes and times, so a change reads it again); each file
    left out is named, with its reason, in the server's log (once per change)."""
    lessons, left_out = {}, {}
    for name, _size, _mtime in signature:
        path = folder / name
        try:
            lesson = read_lesson_file(path.read_bytes(), name)
        except (LessonError, OSError) as err:
            reason = str(err) if isinstance(err, LessonError) else f"{name}: {err}"
            left_out[Path(name).stem] = reason
            _LOG.warning("lessons folder %s: left out %s", folder, reason)
            continue
        lessons[lesson.name] = lesson
    return lessons, left_out


@functools.lru_cache(maxsize=16)
def _log_unreadable(folder: Path, reason: str) -> None:
    """Say once in the server's log that the lessons folder cannot be read, and why."""
    _LOG.warning("lessons folder %s cannot be read: %s", folder, reason)


def _folder(folder: Path | None) -> tuple[dict[str, Lesson], dict[str, str]]:
    """The folder's lessons and its files left out by stem (``""``: the folder itself)."""
    folder = folder if folder is not None else lessons_dir()
    if folder is None:
        return {}, {}
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".toml" and p.is_file())
        signature = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except OSError as err:
        reason = f"{folder}: {err.strerror or err}"
        _log_unreadable(folder, reason)
        return {}, {"": reason}
    return _read_folder(folder, signature)


def folder_lessons(folder: Path | None = None) -> tuple[dict[str, Lesson], tuple[str, ...]]:
    """The lessons of the operator's folder (:func:`lessons_dir`, or ``folder``) and, for each
    file left out, the whole reason (one line naming the file, the step, the field and why);
    nothing when no folder is named. A folder that cannot be read is one reason."""
    lessons, left_out = _folder(folder)
    return lessons, tuple(left_out.values())


def folder_left_out(name: str) -> str | None:
    """Why the operator's folder file of lesson ``name`` (``<name>.toml``) was left out, or
    ``None`` when no such file was."""
    return _folder(None)[1].get(name) if name else None


def is_shipped(lesson: Lesson) -> bool:
    """Whether ``lesson`` is one of the lab's shipped lessons (whose texts are the lab's own
    Markdown); any other's text is shown as plain text."""
    return shipped_lessons().get(lesson.name) is lesson


def _store():
    from dashboard.rooms.presenter import shared_store

    return shared_store()


@functools.lru_cache(maxsize=128)
def _room_file(name: str, text: str) -> Lesson | None:
    """A room's lesson file read again (it was checked when loaded), or ``None``."""
    try:
        return parse_lesson(text, name)
    except LessonError:
        return None


def room_lessons(room: str) -> dict[str, Lesson]:
    """The lessons loaded in room ``room`` (none for ``""``, an ended room, or a room server
    that cannot be reached now)."""
    from dashboard.rooms.store import RoomServerUnreachable

    if not room:
        return {}
    try:
        texts = _store().lesson_texts(room)
    except RoomServerUnreachable:
        return {}
    found = {name: _room_file(name, text) for name, text in texts.items()}
    return {name: lesson for name, lesson in found.items() if lesson is not None}


def find_lesson(name: str, room: str = "") -> Lesson | None:
    """The lesson a link names: a shipped one, else the operator's folder's, else one loaded
    in ``room`` (the room of the learner's link); ``None`` when there is none."""
    from dashboard.rooms.store import RoomServerUnreachable

    found = shipped_lessons().get(name) or folder_lessons()[0].get(name)
    if found is not None or not room:
        return found
    try:
        text = _store().lesson_text(room, name)
    except RoomServerUnreachable:
        return None
    return None if text is None else _room_file(name, text)


def all_lessons(room: str = "") -> dict[str, Lesson]:
    """Every lesson a link may name in ``room`` (``""``: outside any room): the room's loaded
    ones, the folder's, then the shipped ones (a shipped name always means the shipped lesson,
    a folder's name the folder's)."""
    return {**room_lessons(room), **folder_lessons()[0], **shipped_lessons()}


def load_lesson(data: bytes, filename: str, room: str) -> Lesson:
    """Load a lesson file (an upload, or one made in the lab) into ``room``: checked as
    :func:`read_lesson_file` does, refused when the operator's folder has a file of its name,
    and kept by the room (:meth:`~dashboard.rooms.store.RoomStore.keep_lesson`; the room's own
    file of that name is replaced). Nothing is written to disk.

    Returns:
        The lesson; a link of the room names it by its file's stem.

    Raises:
        LessonError: for a file it cannot use, a name the folder has, a room that is not
            open, or a room (or server) that keeps as many files as it may.
    """
    from dashboard.rooms.store import LessonLimitError, RoomEndedError, RoomServerUnreachable

    lesson = read_lesson_file(data, filename)
    folder = lessons_dir()
    if folder is not None and (folder / f"{lesson.name}.toml").exists():
        raise LessonError(t("lesson.upload_folder_has", file=f"{lesson.name}.toml"))
    if not room:
        raise LessonError(t("lesson.upload_no_room"))
    try:
        _store().keep_lesson(room, lesson.name, data.decode("utf-8"))
    except LessonLimitError as err:
        raise LessonError(t(f"lesson.upload_full_{err.scope}", n=err.limit)) from err
    except RoomEndedError as err:
        raise LessonError(t("lesson.upload_no_room")) from err
    except RoomServerUnreachable as err:
        raise LessonError(t("lesson.upload_unreachable")) from err
    return lesson
