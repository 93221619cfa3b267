"""A learner's take-home record of a lesson, as Markdown in their language: the lesson, each
step's title with its link, what to notice and what the step showed (the values it sets and
the headline figure this learner's page showed for it, :mod:`dashboard.lesson_figures`),
and the room's questions this session saw, with their own answer, the room's tally and,
once shown, the right answer (:func:`record_markdown`). A lesson file's text that is not
shipped is escaped for Markdown and HTML (:func:`record_text`), so any Markdown viewer shows
it as plain text.

The download makes the record when it is clicked (:func:`current_record`), outside any
script run: nothing here reads Streamlit's session, each text is in the language given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dashboard.i18n import lookup, t_in
from dashboard.lessons.library import is_shipped
from dashboard.lessons.model import Lesson, Step
from dashboard.literal import literal, plain_html
from dashboard.room_questions import option_text, question_text
from dashboard.rooms.store import Poll

Polls = Mapping[int, tuple[Poll, int | None]]
"""The room's questions by number: (the newest state of the poll, this learner's answer)."""


def record_text(lesson: Lesson, text: str) -> str:
    """``text`` of ``lesson`` for the record: a shipped lesson's own Markdown as written, any
    other lesson's escaped for Markdown and HTML (:func:`dashboard.literal.plain_html`: no
    tag, image, link or raw URL)."""
    return text if is_shipped(lesson) else plain_html(text)


def poll_lines(poll: Poll, choice: int | None, lang: str) -> list[str]:
    """One question of the room: its text, this learner's answer, the tally and, once shown,
    the right answer."""
    question = poll.question
    lines = [f"- **{question_text(question, lang)}**"]
    if choice is not None:
        answer = option_text(question, choice, lang)
        lines.append(f"  - {t_in(lang, 'lesson.record_yours', answer=answer)}")
    tally = " · ".join(
        f"{option_text(question, index, lang)}: {count}" for index, count in enumerate(poll.tally)
    )
    lines.append(f"  - {t_in(lang, 'lesson.record_tally', tally=tally)}")
    if poll.revealed and question.correct is not None:
        right = option_text(question, question.correct, lang)
        lines.append(f"  - {t_in(lang, 'lesson.record_right', answer=right)}")
    return lines


def value_label(key: str, lang: str) -> str:
    """The words of a step's query key ``"<page>.<name>"`` in ``lang``: its control's label
    (the page's ``ctl_<name>`` or ``<name>``, else the common ``ctl_<name>``), else the key."""
    page, _, name = key.partition(".")
    for candidate in (f"{page}.ctl_{name}", f"{page}.{name}", f"common.ctl_{name}"):
        text = lookup(candidate, lang)
        if text is not None and "{" not in text:
            return text
    return key


def value_words(text: str, lang: str) -> str:
    """A step's value as words: on and off for a switch, else the text as it is (literal)."""
    if text in ("true", "false"):
        return t_in(lang, f"lesson.record_{'on' if text == 'true' else 'off'}")
    return literal(text)


def shown_lines(step: Step, lang: str, figure: str | None) -> list[str]:
    """What step ``step`` showed: the values it sets (or that it shows the page's own), and
    the headline figure its page showed (``"label = value"``), when it showed one."""
    values = "; ".join(
        f"{value_label(key, lang)} = {value_words(text, lang)}" for key, text in step.query
    )
    values = values or t_in(lang, "lesson.record_defaults")
    lines = [f"- {t_in(lang, 'lesson.record_values', values=values)}"]
    if figure is not None:
        lines.append(f"- {t_in(lang, 'lesson.record_figure', figure=figure)}")
    return lines


def step_shown(
    lesson: Lesson, lang: str, figures: Mapping[tuple[int, str], str]
) -> Callable[[int], list[str]]:
    """Step number (from 1) -> :func:`shown_lines` of that step of ``lesson``, with the
    figure kept for it in ``lang`` (``figures``: (step number, lang) -> text)."""

    def shown(number: int) -> list[str]:
        step = lesson.steps[number - 1]
        lines = shown_lines(step, lang, figures.get((number, lang)))
        return [record_text(lesson, line) for line in lines]

    return shown


def record_markdown(
    lesson: Lesson,
    lang: str,
    link_of: Callable[[int], str],
    polls: Polls,
    shown: Callable[[int], list[str]] | None = None,
) -> str:
    """The record of ``lesson`` in ``lang``.

    Args:
        lesson: the lesson walked.
        lang: the learner's language (``"en"`` or ``"zh"``).
        link_of: step number (from 1) -> the step's full link.
        polls: the room's questions this session saw, by number: (the newest poll seen, this
            learner's answer or ``None``).
        shown: step number -> the lines of what the step showed (:func:`step_shown`).

    Returns:
        Markdown text.
    """
    intro = t_in(lang, "lesson.record_intro", n=len(lesson.steps))
    lines = [f"# {record_text(lesson, lesson.title(lang))}", "", intro, ""]
    for number, step in enumerate(lesson.steps, start=1):
        step_title = record_text(lesson, step.title(lang))
        lines += [f"## {number}. {step_title}", "", f"<{link_of(number)}>", ""]
        lines += [f"{t_in(lang, 'lesson.notice')} {record_text(lesson, step.notice(lang))}", ""]
        if shown is not None:
            lines += [*shown(number), ""]
    if polls:
        lines += [f"## {t_in(lang, 'lesson.record_questions')}", ""]
        for number in sorted(polls):
            lines += poll_lines(*polls[number], lang)
        lines.append("")
    return "\n".join(lines)


def with_current_poll(seen: Polls, current: Poll | None) -> dict[int, tuple[Poll, int | None]]:
    """The questions seen, the room's current one in its state now (its tally, whether the
    answer is shown), with this learner's answer to it kept."""
    polls = dict(seen)
    if current is not None:
        polls[current.number] = (current, polls.get(current.number, (current, None))[1])
    return polls


def current_record(
    lesson: Lesson,
    lang: str,
    links: tuple[str, ...],
    seen: Polls,
    room_poll: Callable[[], Poll | None],
    figures: Mapping[tuple[int, str], str],
) -> bytes:
    """The record as the learner downloads it (UTF-8): made at the click, from the session's
    questions seen (``seen``, updated in place as they answer) and the room's current
    question read now (``room_poll``).

    Args:
        lesson, lang: as :func:`record_markdown`.
        links: each step's full link, in order.
        seen: the session's questions seen (:func:`dashboard.room_questions.seen_polls`).
        room_poll: the room's current question now, or ``None`` (no room, no question, or
            the room server away).
        figures: the headline figures the session's pages showed, (step number, lang) ->
            text (:func:`dashboard.lesson_figures.kept_figures`, updated in place).
    """
    polls = with_current_poll(seen, room_poll())
    shown = step_shown(lesson, lang, dict(figures))
    return record_markdown(lesson, lang, lambda k: links[k - 1], polls, shown).encode("utf-8")
