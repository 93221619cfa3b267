"""A presenter's day: a reload, the key typed again, the take-home record."""

from __future__ import annotations

import concurrent.futures

import pytest

from dashboard.i18n import t_in
from dashboard.lesson_figures import KEPT_KEY as KEPT
from dashboard.lesson_record import value_label, value_words
from dashboard.lessons.model import shipped_lessons
from dashboard.rooms import presenter
from tests.conftest import MODEL_PAGES
from tests.dashboard.conftest import open_app
from tests.dashboard.test_rooms import all_text, new_code, presenting

AWAY_LATER_S = 60.0  # past the store's PRESENTER_AWAY_S


def reloaded(at, page: str):
    """A new session opening the link ``at`` shows (a reload of its tab)."""
    return open_app(page, **dict(at.query_params))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_presenter_who_reloads_is_told_how_to_present_again_and_keeps_their_place(
    lang, monkeypatch
):
    """The presenter walks a lesson (step 3, on Step by step), looks at another page with a
    value of their own, and reloads: the new tab follows its own room on that page (it did
    not land: the link's step sent it to Step by step, the room back, without end), reads
    how to present again once the presenter counts as away, and typing the key keeps the
    page, its value and the lesson's step as the room's view."""
    code = new_code()
    host = presenting(code, "step_by_step", lang=lang, lesson="self-attention-20")
    host.query_params["lesson.step"] = "3"
    host.run()
    host.switch_page("views/multihead.py").run()
    host.slider(key="multihead.gallery_seed").set_value(7).run()
    before = presenter.shared_store().get(code).view
    assert before.page == "multihead" and ("multihead.gallery_seed", "7") in before.params

    tab = reloaded(host, "multihead")
    assert not tab.exception
    seed = tab.slider(key="multihead.gallery_seed")
    assert seed.value == 7 and seed.disabled  # a follower of its own room, on its page
    assert t_in(lang, "room.present_again") not in all_text(tab)

    store = presenter.shared_store()
    clock = store._clock
    monkeypatch.setattr(store, "_clock", lambda: clock() + AWAY_LATER_S)
    tab.run()
    assert store.get(code).presenter_away
    assert t_in(lang, "room.present_again") in all_text(tab)

    key, _source = presenter.presenter_key()
    tab.text_input(key="_room.presenter_key").input(key).run()
    assert not tab.exception
    assert store.get(code).view == before  # the room's view is where the presenter is
    assert tab.slider(key="multihead.gallery_seed").value == 7
    assert not tab.slider(key="multihead.gallery_seed").disabled


# ---------------------------------------------------------------- the take-home record


@pytest.fixture
def made_records(monkeypatch):
    """Every download made when clicked that a run registers (Streamlit keeps the callable
    and calls it on the click), by file name, newest last."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    made: dict[str, list] = {}
    add_deferred = MediaFileManager.add_deferred

    def keep(self, data, mimetype, coordinates, file_name=None, **kwargs):
        made.setdefault(file_name, []).append(data)
        return add_deferred(self, data, mimetype, coordinates, file_name=file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    return made


def clicked_in_another_thread(make) -> tuple[str, list[str]]:
    """What a click downloads: ``make()`` run outside any script run, as Streamlit runs it;
    the text and the Streamlit warnings it logged."""
    import logging

    class Keep(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    keep = Keep()
    logger = logging.getLogger("streamlit")
    logger.addHandler(keep)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            text = pool.submit(make).result().decode("utf-8")
    finally:
        logger.removeHandler(keep)
    return text, keep.lines


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_record_drawn_before_an_answer_holds_it_the_tally_and_the_reveal_when_downloaded(
    lang, made_records
):
    """A follower's record button is drawn before they answer (the answer is given in the
    room's part, after the lesson bar): downloaded after the answer, the record holds it and
    the room's tally at the click, and after the presenter shows the answer, the right one;
    made outside any run, it logs nothing."""
    code = new_code()
    host = presenting(code, "scaling", lesson="why-sqrt-dk", **{"lesson.step": "1"})
    host.radio(key="_room.pick.scaling").set_value("scaling_peak")
    host.button(key="_room.ask").click().run()
    number = presenter.shared_store().get(code).poll.number
    learner = open_app(None, room=code, lang=lang)
    assert not learner.exception
    drawn_before = made_records[f"why-sqrt-dk-{lang}.md"][-1]
    other = open_app(None, room=code)
    other.button(key=f"_room.answer.{number}.0").click().run()

    learner.button(key=f"_room.answer.{number}.1").click().run()
    assert not learner.exception
    yes, no = (t_in(lang, f"room.q_scaling_peak_a{i}") for i in (0, 1))
    text, logged = clicked_in_another_thread(drawn_before)
    assert t_in(lang, "lesson.record_yours", answer=no) in text
    assert t_in(lang, "lesson.record_tally", tally=f"{yes}: 1 · {no}: 1") in text
    assert t_in(lang, "lesson.record_right", answer=yes) not in text
    assert logged == []

    host.button(key="_room.reveal").click().run()
    text, logged = clicked_in_another_thread(drawn_before)
    assert t_in(lang, "lesson.record_right", answer=yes) in text
    assert logged == []


NO_FIGURE = {("heads", "census"), ("variants", "cost"), ("gradients", "dk"), ("real_model", "grid")}
"""The steps' sections that show no single number (a census, a cost chart, a spread table, a
grid of maps): the record lists their values alone."""
FIGURE_STEPS = [
    (name, number)
    for name, lesson in shipped_lessons().items()
    for number, step in enumerate(lesson.steps, start=1)
    if step.page not in MODEL_PAGES  # tests/dashboard/test_lesson_claims_model.py: the rest
]


def kept_figure_is_shown(at, step, number: int, lang: str) -> str | None:
    """The figure the session kept for step ``number`` is a metric the page shows (its label
    and its value as drawn), or none for a step in :data:`NO_FIGURE`; returns it."""
    kept = at.session_state[KEPT].get((number, lang)) if KEPT in at.session_state else None
    if (step.page, step.section) in NO_FIGURE:
        assert kept is None, kept
        return None
    assert kept is not None, f"step {number} ({step.page}, {step.section}) kept no figure"
    label, value = kept.split(" = ", 1)
    assert {m.label: m.value for m in at.metric}[label] == value
    return kept


@pytest.mark.parametrize(("name", "number"), FIGURE_STEPS)
def test_each_step_s_figure_in_the_record_is_the_number_its_page_shows(name, number, made_records):
    """For each step: the page opened at the step shows its headline figure as a metric
    (none for a section of :data:`NO_FIGURE`), and the record (in Chinese, as the learner
    reads it) lists it with the step's values in words."""
    lesson = shipped_lessons()[name]
    step = lesson.steps[number - 1]
    at = open_app(step.page, lang="zh", lesson=name, **{"lesson.step": str(number)})
    assert not at.exception
    figure = kept_figure_is_shown(at, step, number, "zh")

    text, _logged = clicked_in_another_thread(made_records[f"{name}-zh.md"][-1])
    section = text.split(f"## {number}. {step.title('zh')}", 1)[1].split("\n## ", 1)[0]
    figure_line = t_in("zh", "lesson.record_figure", figure="\0").split("\0")[0]
    if figure is None:
        assert figure_line not in section
    else:
        assert t_in("zh", "lesson.record_figure", figure=figure) in section
    for key, value in step.query:
        assert value_label(key, "zh") in section and value_words(value, "zh") in section
    if not step.query:
        assert t_in("zh", "lesson.record_defaults") in section


def test_a_figure_is_kept_only_for_the_step_s_own_view(made_records):
    """Moved away from the step's values (another boss relevance on Intuition's meeting),
    the page's number is not the step's: the record keeps the one the step's view showed."""
    at = open_app("intuition", lang="en", lesson="self-attention-20", **{"lesson.step": "2"})
    shown = kept_figure_is_shown(at, shipped_lessons()["self-attention-20"].steps[1], 2, "en")
    at.slider(key="intuition.boss").set_value(1.0).run()
    assert not at.exception
    assert at.session_state[KEPT][(2, "en")] == shown
    text, _logged = clicked_in_another_thread(made_records["self-attention-20-en.md"][-1])
    assert t_in("en", "lesson.record_figure", figure=shown) in text
