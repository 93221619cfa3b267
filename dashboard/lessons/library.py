"""Where the lab's lessons come from, each checked by :func:`dashboard.lessons.model.
parse_lesson` when read:

* the shipped files (:func:`~dashboard.lessons.model.shipped_lessons`);
* a folder the server's operator names: ``ATTENTION_LAB_LESSONS_DIR``, else the secret
  ``lessons_dir`` (never a path from a link); its ``*.toml`` files are read again when one of
  them changes, and a file that cannot be used is left out with its reason
  (:func:`folder_lessons`);
* a file a presenter loads (an upload, or one made in the lab, :mod:`dashboard.lesson_author`):
  kept for this server process and, when a folder is named, written into it, so that every
  replica reading that folder and a restarted server have it (:func:`load_lesson`).

A lesson's name is its file's stem; the shipped names are the shipped lessons' own (a
folder's or loaded file of the same name is refused).
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from dashboard.lessons.model import Lesson, LessonError, parse_lesson, shipped_lessons

DIR_ENV = "ATTENTION_LAB_LESSONS_DIR"
DIR_SECRET = "lessons_dir"
MAX_FILE_BYTES = 64 * 1024
"""The largest lesson file read (a 30-step lesson in two languages is about 20 KB)."""
MAX_LOADED = 64
"""Lessons loaded into one server process (an older one makes way)."""
_LOCK = threading.Lock()
_LOADED: dict[str, Lesson] = {}  # name -> lesson, oldest first


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
def _read_folder(folder: Path, signature: tuple) -> tuple[dict[str, Lesson], tuple[str, ...]]:
    """The folder's lessons and the reasons for each file left out (``signature``: the files'
    names, sizes and times, so a change reads it again)."""
    lessons, left_out = {}, []
    for name, _size, _mtime in signature:
        path = folder / name
        try:
            lesson = read_lesson_file(path.read_bytes(), name)
        except (LessonError, OSError) as err:
            left_out.append(str(err) if isinstance(err, LessonError) else f"{name}: {err}")
            continue
        lessons[lesson.name] = lesson
    return lessons, tuple(left_out)


def folder_lessons(folder: Path | None = None) -> tuple[dict[str, Lesson], tuple[str, ...]]:
    """The lessons of the operator's folder (:func:`lessons_dir`, or ``folder``) and, for each
    file left out, the reason (one line naming the file); nothing when no folder is named.
    A folder that cannot be read is one reason."""
    folder = folder if folder is not None else lessons_dir()
    if folder is None:
        return {}, ()
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".toml" and p.is_file())
        signature = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except OSError as err:
        return {}, (f"{folder}: {err.strerror or err}",)
    return _read_folder(folder, signature)


def all_lessons() -> dict[str, Lesson]:
    """Every lesson a link may name: the shipped ones, the folder's, then those loaded into
    this process (a shipped name always means the shipped lesson)."""
    with _LOCK:
        loaded = dict(_LOADED)
    return {**loaded, **folder_lessons()[0], **shipped_lessons()}


def load_lesson(data: bytes, filename: str) -> Lesson:
    """Load a lesson file (an upload, or one made in the lab): checked as
    :func:`read_lesson_file` does, kept for this process (at most :data:`MAX_LOADED`, the
    oldest making way) and, when the operator named a folder, written into it (atomically).

    Returns:
        The lesson; a link names it by its file's stem.

    Raises:
        LessonError: for a file it cannot use, or a folder it cannot write to.
    """
    lesson = read_lesson_file(data, filename)
    folder = lessons_dir()
    if folder is not None:
        _write_atomically(folder, f"{lesson.name}.toml", data)
    with _LOCK:
        _LOADED.pop(lesson.name, None)
        _LOADED[lesson.name] = lesson
        while len(_LOADED) > MAX_LOADED:
            del _LOADED[next(iter(_LOADED))]
    return lesson


def _write_atomically(folder: Path, name: str, data: bytes) -> None:
    """Write ``folder/name`` so that a reader sees the old file or the new one, never half.

    Raises:
        LessonError: when the folder cannot be written to.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".part")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, folder / name)
    except OSError as err:
        raise LessonError(f"{name}: cannot be kept in {folder} ({err.strerror or err})") from err
