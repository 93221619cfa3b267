"""A lesson file, read and checked: steps through the lab's pages, each a link's view with a
title and what to notice, in English and Chinese.

A lesson is one TOML file (read with the standard library's :mod:`tomllib`)::

    [lesson]
    minutes = 10
    level = "beginner"                     # beginner, intermediate or advanced
    title = { en = "Why √d_k", zh = "为什么要除以 √d_k" }

    [[step]]
    page = "scaling"                       # a page of dashboard.views.PAGES
    query = { "scaling.d_ks" = "64,256" }  # exactly a link's query: "<page>.<name>" = text
    title = { en = "…", zh = "…" }
    notice = { en = "…", zh = "…" }        # what to notice
    section = "table"                      # optional: the section the step is about
    question = "scaling_peak"              # optional: a ready question of the page
    notes = { en = "…", zh = "…" }         # optional: for the presenter only

:func:`parse_lesson` refuses a file that does not say all of this with a
:class:`LessonError` naming the file, the step and the field. A step's *values* are checked
as a link's are, when the page draws them (the same notices); a test opens every step of
every shipped lesson and asserts none is given.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.i18n import LANG_KEY
from dashboard.rooms.questions import ready_questions
from dashboard.views import PAGE_SECTIONS, PAGES

LANGS = ("en", "zh")
LEVELS = ("beginner", "intermediate", "advanced")
FOLDER = Path(__file__).parent
MAX_STEPS = 30
MAX_TEXT_LEN = 600
MAX_MINUTES = 240
LESSON_KEY = "lesson"
STEP_KEY = "lesson.step"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_PAGES = tuple(name for name, _icon in PAGES)


class LessonError(ValueError):
    """A lesson file that cannot be used; the message names the file, the step and the
    field, and says why."""


@dataclass(frozen=True)
class Text:
    """A text in each language of :data:`LANGS`."""

    en: str
    zh: str

    def __call__(self, lang: str) -> str:
        """The text in ``lang`` (English for any other language)."""
        return self.zh if lang == "zh" else self.en


@dataclass(frozen=True)
class Step:
    """One step: a page's view and what to see in it.

    Attributes:
        page: a page name of :data:`dashboard.views.PAGES`.
        query: ``(key, text)`` pairs of the page's link, each key ``"<page>.<name>"``.
        title, notice: the step's title and what to notice.
        question: the id of one of the page's ready questions, or ``""``.
        notes: what the presenter alone reads (``None`` when the step has none).
        section: the section of the page the step is about (a name of
            :data:`dashboard.views.PAGE_SECTIONS`), shown first on arriving at the step;
            ``""``: the page's first chart.
    """

    page: str
    query: tuple[tuple[str, str], ...]
    title: Text
    notice: Text
    question: str = ""
    notes: Text | None = None
    section: str = ""


@dataclass(frozen=True)
class Lesson:
    """A lesson: its name (the file's stem, which a link names), title, length and steps."""

    name: str
    title: Text
    minutes: int
    level: str
    steps: tuple[Step, ...]


def step_query(lesson: Lesson, number: int, lang: str) -> dict[str, str]:
    """The link query of step ``number`` (from 1) of ``lesson`` for a learner in ``lang``:
    the step's page values, the lesson's keys and the language."""
    query = dict(lesson.steps[number - 1].query)
    query.update({LESSON_KEY: lesson.name, STEP_KEY: str(number), LANG_KEY: lang})
    return query


def _where(source: str, step: int | None, field: str) -> str:
    return f"{source}: " + (f"step {step}, " if step is not None else "") + f"field {field!r}"


def _text(raw: Any, source: str, step: int | None, field: str) -> Text:
    """A ``{en = …, zh = …}`` table as a :class:`Text`.

    Raises:
        LessonError: naming the file, step and field, when it is not such a table of
            non-empty texts of at most :data:`MAX_TEXT_LEN` characters.
    """
    where = _where(source, step, field)
    if not isinstance(raw, dict) or set(raw) != set(LANGS):
        raise LessonError(f"{where}: needs a text in each of {', '.join(LANGS)}, got {raw!r}")
    for lang, value in raw.items():
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT_LEN:
            raise LessonError(f"{where}: the {lang} text must be 1 to {MAX_TEXT_LEN} characters")
    return Text(raw["en"].strip(), raw["zh"].strip())


def _query(raw: Any, page: str, source: str, step: int) -> tuple[tuple[str, str], ...]:
    """A step's query: texts under keys of its page.

    Raises:
        LessonError: for a key of another page or a value that is not a text.
    """
    if not isinstance(raw, dict):
        raise LessonError(f"{_where(source, step, 'query')}: needs a table of texts")
    for key, value in raw.items():
        if not key.startswith(f"{page}."):
            raise LessonError(
                f"{_where(source, step, 'query')}: key {key!r} is not one of page {page!r}"
            )
        if not isinstance(value, str) or len(value) > MAX_TEXT_LEN:
            raise LessonError(f"{_where(source, step, 'query')}: {key} needs a text, got {value!r}")
    return tuple(sorted(raw.items()))


def parse_step(raw: Any, source: str, number: int) -> Step:
    """Step ``number`` (from 1) of a lesson file: a table with ``page``, ``query``, ``title``,
    ``notice`` and the optional ``question`` and ``notes`` (see the module's docstring).

    Args:
        raw: the step's table as TOML reads it.
        source: how errors name the file.
        number: the step's number, from 1.

    Raises:
        LessonError: naming the file, the step and the field that is wrong.
    """
    if not isinstance(raw, dict):
        raise LessonError(f"{source}: step {number} is not a table")
    unknown = set(raw) - {"page", "query", "title", "notice", "question", "notes", "section"}
    if unknown:
        raise LessonError(f"{_where(source, number, sorted(unknown)[0])}: not a step's field")
    page = raw.get("page")
    if page not in _PAGES:
        raise LessonError(f"{_where(source, number, 'page')}: {page!r} is not a page of the lab")
    question = raw.get("question", "")
    if question and question not in {q.id for q in ready_questions(page)}:
        raise LessonError(
            f"{_where(source, number, 'question')}: {question!r} is not a ready question of {page}"
        )
    section = raw.get("section", "")
    if section and section not in PAGE_SECTIONS.get(page, ()):
        named = ", ".join(PAGE_SECTIONS.get(page, ())) or "none"
        raise LessonError(
            f"{_where(source, number, 'section')}: {section!r} is not a section of {page}"
            f" (its sections: {named})"
        )
    notes = raw.get("notes")
    return Step(
        page,
        _query(raw.get("query", {}), page, source, number),
        _text(raw.get("title"), source, number, "title"),
        _text(raw.get("notice"), source, number, "notice"),
        question,
        None if notes is None else _text(notes, source, number, "notes"),
        section,
    )


def parse_lesson(text: str, name: str, source: str = "") -> Lesson:
    """Read a lesson file's ``text`` as lesson ``name``.

    Args:
        text: the file's TOML.
        name: the lesson's name (a link's ``lesson=``): 1 to 40 of a-z, 0-9, ``-``, ``_``.
        source: how errors name the file (default: ``<name>.toml``).

    Returns:
        The lesson.

    Raises:
        LessonError: naming the file, the step and the field, for anything it cannot use.
    """
    source = source or f"{name}.toml"
    if not _NAME.fullmatch(name):
        raise LessonError(f"{source}: lesson name {name!r}: 1 to 40 of a-z, 0-9, '-', '_'")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise LessonError(f"{source}: not TOML ({err})") from err
    head, steps = data.get("lesson"), data.get("step")
    if not isinstance(head, dict):
        raise LessonError(f"{source}: needs a [lesson] table")
    minutes = head.get("minutes")
    if not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
        raise LessonError(f"{_where(source, None, 'minutes')}: a whole number 1 to {MAX_MINUTES}")
    if head.get("level") not in LEVELS:
        raise LessonError(f"{_where(source, None, 'level')}: one of {', '.join(LEVELS)}")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise LessonError(f"{source}: needs 1 to {MAX_STEPS} [[step]] tables")
    return Lesson(
        name,
        _text(head.get("title"), source, None, "title"),
        minutes,
        head["level"],
        tuple(parse_step(raw, source, number) for number, raw in enumerate(steps, start=1)),
    )


def lesson_toml(lesson: Lesson) -> str:
    """``lesson`` written as a lesson file (TOML, by ``tomli_w``): :func:`parse_lesson` reads
    it back as the same lesson."""
    import tomli_w

    def text(value: Text) -> dict[str, str]:
        return {"en": value.en, "zh": value.zh}

    steps = []
    for step in lesson.steps:
        raw: dict[str, Any] = {"page": step.page, "query": dict(step.query)}
        raw.update(title=text(step.title), notice=text(step.notice))
        if step.section:
            raw["section"] = step.section
        if step.question:
            raw["question"] = step.question
        if step.notes is not None:
            raw["notes"] = text(step.notes)
        steps.append(raw)
    head = {"minutes": lesson.minutes, "level": lesson.level, "title": text(lesson.title)}
    return tomli_w.dumps({"lesson": head, "step": steps})


@functools.cache
def shipped_lessons() -> dict[str, Lesson]:
    """The lessons shipped in :data:`FOLDER` by name, in the order of their file names (read
    once per process).

    Raises:
        LessonError: when a shipped file is wrong (a test keeps them right).
    """
    return {
        path.stem: parse_lesson(path.read_text(encoding="utf-8"), path.stem, path.name)
        for path in sorted(FOLDER.glob("*.toml"))
    }
