"""Questions to the room: each page's ready ones (from its "What to look for" list) and the
presenter's typed ones.

A ready question is an id whose text, answers and explanation are locale strings
(``room.q_<id>``, ``room.q_<id>_a<i>``, ``room.q_<id>_why``), so each learner reads it in
their own language; the right answer is the figure the page measures, named in ``_why``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.rooms.store import MAX_OPTIONS, MIN_OPTIONS, Question

MAX_QUESTION_LEN = 200
MAX_ANSWER_LEN = 80


class QuestionRefused(ValueError):
    """A typed question that cannot be asked, with why.

    Attributes:
        reason: ``"text_length"``, ``"answer_count"`` or ``"answer_length"``; the locale key
            ``room.bad_question_<reason>`` states the rule.
        detail: the values that key names (``count``, ``low``, ``high``, ``max``).
    """

    def __init__(self, message: str, reason: str, **detail: object) -> None:
        super().__init__(message)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ReadyQuestion:
    """A page's prediction put as a question.

    Attributes:
        id: names its locale strings (``room.q_<id>``…).
        options: how many answers it offers.
        correct: the index of the right one.
    """

    id: str
    options: int
    correct: int


READY_QUESTIONS: dict[str, tuple[ReadyQuestion, ...]] = {
    "playground": (
        ReadyQuestion("playground_causal", 3, 0),
        ReadyQuestion("playground_linear", 2, 0),
    ),
    "scaling": (
        ReadyQuestion("scaling_peak", 2, 0),
        ReadyQuestion("scaling_std", 3, 0),
    ),
    "multihead": (
        ReadyQuestion("multihead_entropy", 3, 1),
        ReadyQuestion("multihead_distance", 3, 0),
    ),
    "variants": (
        ReadyQuestion("variants_exact", 3, 0),
        ReadyQuestion("variants_cost", 3, 1),
    ),
    "properties": (
        ReadyQuestion("properties_shuffle", 3, 0),
        ReadyQuestion("properties_overflow", 3, 0),
    ),
}
"""Ready questions by page name; a page not listed offers typed questions only."""


def ready_questions(page: str) -> tuple[ReadyQuestion, ...]:
    """The ready questions of ``page`` (none for a page without them)."""
    return READY_QUESTIONS.get(page, ())


def find_ready(question_id: str) -> ReadyQuestion:
    """The ready question ``question_id``.

    Raises:
        ValueError: naming the id when no page has it.
    """
    for questions in READY_QUESTIONS.values():
        for question in questions:
            if question.id == question_id:
                return question
    raise ValueError(f"no ready question {question_id!r}")


def ready_to_ask(question_id: str) -> Question:
    """The ready question ``question_id`` as a :class:`Question` to put to the room.

    Raises:
        ValueError: naming the id when no page has it.
    """
    ready = find_ready(question_id)
    return Question(ready.id, "", ("",) * ready.options, ready.correct)


def typed_question(text: str, answers: str, correct: int | None) -> Question:
    """A question typed on the spot.

    Args:
        text: the question, 1 to :data:`MAX_QUESTION_LEN` characters.
        answers: one answer per line (blank lines ignored), 2 to 4 answers of at most
            :data:`MAX_ANSWER_LEN` characters each.
        correct: the index of the right answer, or ``None`` for a poll.

    Returns:
        The question.

    Raises:
        QuestionRefused: (a ``ValueError``) naming the problem, for an empty or too long
            question, too few or too many answers, or a too long answer.
        ValueError: for a right answer that is not one of them.
    """
    text = " ".join(text.split())
    if not text or len(text) > MAX_QUESTION_LEN:
        message = f"a question of {len(text)} characters; 1 to {MAX_QUESTION_LEN}"
        raise QuestionRefused(message, "text_length", count=len(text), max=MAX_QUESTION_LEN)
    options = tuple(" ".join(line.split()) for line in answers.splitlines() if line.strip())
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        message = f"{len(options)} answers; {MIN_OPTIONS} to {MAX_OPTIONS}"
        limits = {"count": len(options), "low": MIN_OPTIONS, "high": MAX_OPTIONS}
        raise QuestionRefused(message, "answer_count", **limits)
    for number, option in enumerate(options, start=1):
        if len(option) > MAX_ANSWER_LEN:
            message = f"answer {option[:20]!r}… is longer than {MAX_ANSWER_LEN}"
            limits = {"count": len(option), "number": number, "max": MAX_ANSWER_LEN}
            raise QuestionRefused(message, "answer_length", **limits)
    return Question("", text, options, correct)
