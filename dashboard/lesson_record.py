"""A learner's take-home record of a lesson, as Markdown in their language: the lesson, each
step's title with its link and what to notice, and the room's questions this session saw,
with their own answer and the room's tally (:func:`record_markdown`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dashboard.i18n import t
from dashboard.lessons.model import Lesson
from dashboard.room_questions import option_text, question_text
from dashboard.rooms.store import Poll


def poll_lines(poll: Poll, choice: int | None) -> list[str]:
    """One question of the room: its text, this learner's answer, the tally and, once shown,
    the right answer."""
    question = poll.question
    lines = [f"- **{question_text(question)}**"]
    if choice is not None:
        lines.append(f"  - {t('lesson.record_yours', answer=option_text(question, choice))}")
    tally = " · ".join(
        f"{option_text(question, index)}: {count}" for index, count in enumerate(poll.tally)
    )
    lines.append(f"  - {t('lesson.record_tally', tally=tally)}")
    if poll.revealed and question.correct is not None:
        right = option_text(question, question.correct)
        lines.append(f"  - {t('lesson.record_right', answer=right)}")
    return lines


def record_markdown(
    lesson: Lesson,
    lang: str,
    link_of: Callable[[int], str],
    polls: Mapping[int, tuple[Poll, int | None]],
) -> str:
    """The record of ``lesson`` in ``lang``.

    Args:
        lesson: the lesson walked.
        lang: the learner's language (``"en"`` or ``"zh"``).
        link_of: step number (from 1) -> the step's full link.
        polls: the room's questions this session saw, by number: (the newest poll seen, this
            learner's answer or ``None``).

    Returns:
        Markdown text.
    """
    lines = [f"# {lesson.title(lang)}", "", t("lesson.record_intro", n=len(lesson.steps)), ""]
    for number, step in enumerate(lesson.steps, start=1):
        lines += [f"## {number}. {step.title(lang)}", "", f"<{link_of(number)}>", ""]
        lines += [f"{t('lesson.notice')} {step.notice(lang)}", ""]
    if polls:
        lines += [f"## {t('lesson.record_questions')}", ""]
        for number in sorted(polls):
            lines += poll_lines(*polls[number])
        lines.append("")
    return "\n".join(lines)
