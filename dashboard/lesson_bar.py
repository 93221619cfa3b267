"""Walking a lesson: the link's ``lesson=NAME&lesson.step=K`` shows a bar above the page.

The bar says "Step K of N", the step's title and what to notice, with **Back** and **Next**
(a shipped lesson's texts are the lab's own Markdown; any other lesson's, from the operator's
folder or loaded in a room, are shown as plain text, :func:`shown`).
Moving to a step takes the learner to its page with its values (:func:`arrive`: a switch of
page with the step's link, then its values put into the page's controls before they are
drawn, as a room's view is). The learner may move the controls: the bar then says the view is
no longer the step's and offers **Back to the step's view**. The step is in the link, so a
reload, Back/Forward and a shared link land on the same step. A lesson that does not exist,
or a step past its end, gets the usual one-line notice; a lesson whose file the operator's
folder left out gets that notice with the whole reason.

In a room the lesson keys travel with the presenter's view: a follower sees the same bar
without Back and Next (their controls follow the presenter's, :mod:`dashboard.room_follow`),
and the presenter alone reads the step's notes and asks the step's question to the room
with one click (its tally shows below, as for any question).
"""

from __future__ import annotations

import functools
import json
from urllib.parse import urlencode, urlsplit

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import lesson_figures, presentation, room_controls, state
from dashboard.i18n import current_lang, t
from dashboard.lesson_record import current_record
from dashboard.lessons import model
from dashboard.lessons.library import all_lessons, find_lesson, folder_left_out, is_shipped
from dashboard.lessons.model import LESSON_KEY, STEP_KEY, Lesson, Step
from dashboard.literal import plain
from dashboard.room_questions import seen_polls
from dashboard.url_values import RefusedValue, nearest_int
from dashboard.views import section_anchor

DEFAULT_BASE = "http://localhost:8501/"  # a link's address when the run has none (tests)
_ARRIVE = "_lesson.arrive"  # (lesson name, step number): the step this session moves to
_OPENED = "_lesson.opened"  # the lessons this session's links opened
_SCROLL_COUNT = "_lesson.scrolls"  # arrivals so far: each arrival's script is a new element


def shown(lesson: Lesson, text: str) -> str:
    """``text`` of ``lesson`` as markdown: a shipped lesson's own Markdown as written, any
    other lesson's as plain text (:func:`dashboard.literal.plain`: no heading, image, link,
    HTML, maths or colour)."""
    return text if is_shipped(lesson) else plain(text)


def parse_lesson_name(raw: str, room: str = "") -> str:
    """A lesson's name from the link: a shipped lesson, one of the operator's folder or one
    loaded in the link's ``room`` (:func:`dashboard.lessons.library.find_lesson`).

    Raises:
        RefusedValue: for a file of the operator's folder that was left out, with its whole
            reason; naming the lessons there are, for any other text.
    """
    if find_lesson(raw, room) is not None:
        return raw
    why = folder_left_out(raw)
    if why is not None:
        raise RefusedValue(f"left out: {raw!r}", "left_out_lesson", why=plain(why))
    names = ", ".join(all_lessons(room))
    raise RefusedValue(f"no lesson {raw!r}", "unknown_lesson", lessons=names)


def lesson_link(page: str, room: str = "") -> tuple[Lesson, int] | None:
    """The lesson and step (from 1) this run's link names, written back to it; ``None`` when
    it names none (or one that does not exist: the notice says so). A step past the lesson's
    ends is moved to the nearest one, with the notice. A link that opens a lesson on another
    page than its step's (``/?lesson=why-sqrt-dk``) takes the learner to the step
    (:func:`arrive`).

    Args:
        page: the name of the page this run shows.
        room: the room of this run's link (``""``: none): its loaded lessons open too.
    """
    in_link = LESSON_KEY in st.query_params
    name = state.read(LESSON_KEY, "", functools.partial(parse_lesson_name, room=room))
    lesson = find_lesson(name, room) if name else None
    if lesson is None:
        return None
    last = len(lesson.steps)
    raw = st.query_params.get(STEP_KEY)
    number = state.read(STEP_KEY, 1, lambda text: state.parse_int(text, -(10**12), 10**12))
    moved = nearest_int(1, last, 1, 1)(number)
    if moved != number:
        state.add_notice(STEP_KEY, str(raw), "moved_in_range", value=moved, low=1, high=last)
        number = moved
    state.write(LESSON_KEY, name)
    state.write(STEP_KEY, number)
    opened = st.session_state.setdefault(_OPENED, set())
    if in_link and name not in opened:
        opened.add(name)
        own = any(key.startswith(f"{page}.") for key in st.query_params)
        if lesson.steps[number - 1].page != page or not own:  # not the view of a copied link
            st.session_state[_ARRIVE] = (name, number)
    return lesson, number


def step_query(lesson: Lesson, number: int) -> dict[str, str]:
    """The link of step ``number`` of ``lesson``: its page's values, the lesson's keys and
    this learner's language (the presentation view stays with the tab by itself,
    :func:`dashboard.presentation.present_switch`)."""
    return model.step_query(lesson, number, current_lang())


def go_to_step(name: str, number: int) -> None:
    """Next, Back, "Back to the step's view" and a lesson just loaded (a callback, before
    the rerun): the run takes this session to step ``number`` of lesson ``name``."""
    st.session_state[_ARRIVE] = (name, number)


def arrive(
    pages: dict, page: str, found: tuple[Lesson, int] | None, room: str = ""
) -> tuple[Lesson, int] | None:
    """Before the page draws: a learner who pressed Next, Back or "Back to the step's view"
    (or opened a lesson's link, :func:`lesson_link`) is taken to that step: switched to its
    page with its link (the run ends), then, on that page, each control takes the step's
    value before it is drawn (:func:`dashboard.state.give_values`).

    A locked follower never arrives: the room's view is its view, and a pending arrival is
    dropped (a follower's link naming a step on another page than the room's would
    otherwise send it to the step, the room back, and so on without end; a presenter who
    reloaded follows until they type the key again, and then stays where they are).

    Args:
        pages: the app's ``st.Page`` objects by page name.
        page: the name of the page this run shows.
        found: the lesson and step of this run's link (:func:`lesson_link`).
        room: the room of this run's link (``""``: none).

    Returns:
        The lesson and step this run shows.
    """
    pending = st.session_state.get(_ARRIVE)
    if pending is not None and state.locked(STEP_KEY):
        del st.session_state[_ARRIVE]
        return found
    lesson = None if pending is None else find_lesson(pending[0], room)
    if lesson is None:
        return found
    step = lesson.steps[pending[1] - 1]
    if step.page != page:
        state.carry_notices()  # a link's refused step, said on the step's page
        st.switch_page(pages[step.page], query_params=step_query(lesson, pending[1]))
    del st.session_state[_ARRIVE]
    st.session_state[_SCROLL] = st.session_state.get(_SCROLL_COUNT, 0) + 1
    st.session_state[_SCROLL_COUNT] = st.session_state[_SCROLL]
    state.give_values(page, dict(step.query))
    state.write(LESSON_KEY, lesson.name)
    state.write(STEP_KEY, pending[1])
    return lesson, pending[1]


def on_step_view(step: Step, page: str) -> bool:
    """Whether this run shows step ``step``'s view: its page, and each value it sets."""
    query = state.view_query()
    return page == step.page and all(query.get(key) == value for key, value in step.query)


def lesson_bar(
    found: tuple[Lesson, int] | None,
    page: str,
    box: DeltaGenerator,
    *,
    can_move: bool,
    room: str,
) -> None:
    """The lesson's bar in ``box`` (a container kept at the top of the window as the page
    scrolls): one row with the step and its title, Back and Next (when ``can_move``: not for
    a follower) and "More" (the record, leaving the lesson, the presenter's notes); what to
    notice under it, or in the presentation view one click away ("What to notice"), so that
    the step's picture has the projector's first screen. "Back to the step's view" when the
    page shows another view; the presenter's one click that asks the step's question.

    Args:
        found: the lesson and step of this run's link (:func:`lesson_link`), or ``None``.
        page: the page this run shows.
        box: where the bar goes (above the page).
        can_move: whether this learner moves through the lesson (not a locked follower).
        room: the room this tab presents ("" when it presents none): the presenter alone
            reads the notes and asks the step's question with one click.
    """
    if found is None:
        return
    lesson, number = found
    lang, step, last = current_lang(), found[0].steps[number - 1], len(found[0].steps)
    if on_step_view(step, page):  # the page showed the step's own values: its figure counts
        lesson_figures.keep_for_step(number, step.section, lang)
    slim = presentation.presenting()
    with box:
        st.html(BAR_STYLE)
        head, back, ahead, more = st.columns(
            [5, 1.3, 1.3, 1.6], vertical_alignment="center", gap="small"
        )
        head.markdown(
            f"{t('lesson.step_of', k=number, n=last)} · **{shown(lesson, step.title(lang))}**",
            help=shown(lesson, lesson.title(lang)),
        )
        if can_move:
            _moves(lesson, number, last, back, ahead)
        with more.popover(t("lesson.notice_more" if slim else "lesson.more"), width="stretch"):
            st.caption(shown(lesson, lesson.title(lang)))
            if slim:
                st.markdown(f"{t('lesson.notice')} {shown(lesson, step.notice(lang))}")
            record_button(lesson, number, st)
            if can_move:
                st.button(t("lesson.leave"), key="_lesson.leave", on_click=_leave)
            if room and step.notes is not None:
                with st.expander(t("lesson.notes")):
                    st.markdown(shown(lesson, step.notes(lang)))
        if not slim:
            st.markdown(f"{t('lesson.notice')} {shown(lesson, step.notice(lang))}")
        if can_move and not on_step_view(step, page):
            left, right = st.columns([3, 2], vertical_alignment="center")
            left.caption(t("lesson.moved_away"))
            right.button(
                t("lesson.back_to_step"),
                key="_lesson.back_to_step",
                on_click=go_to_step,
                args=(lesson.name, number),
            )
        if room and step.question:
            _ask_button(room, step.question, number)
    _scroll_on_arrival(step)


BAR_KEY = "lesson_bar"
"""The key of the lesson bar's container (its CSS class is ``st-key-lesson_bar``)."""
BAR_STYLE = """<style>
[data-testid="stLayoutWrapper"]:has(> .st-key-lesson_bar) { position: sticky; top: 3.75rem;
  z-index: 99; background: var(--st-background-color, #fff); }
.st-key-lesson_bar { padding: 0.4rem 0 0.3rem 0; border-bottom: 1px solid rgba(49, 51, 63, 0.2); }
</style>"""
"""The bar stays at the top of the window below Streamlit's header (3.75rem) as the page
scrolls, over the page, with a line under it (the sticky box is the wrapper Streamlit puts
around the bar's container: a sticky box stays within its parent)."""
SCROLL_JS = """<script>
(() => {
  const anchor = %(anchor)s, nonce = %(nonce)s;
  const charts = '[data-testid="stVegaLiteChart"], .attn-heatmap';
  let stopped = false, last = null, still = 0, idleSince = null;
  const stop = () => { stopped = true; };
  for (const kind of ['wheel', 'touchmove', 'keydown', 'mousedown'])
    window.addEventListener(kind, stop, {once: true, capture: true});
  function scroller(el) {
    for (let n = el.parentElement; n; n = n.parentElement) {
      const style = getComputedStyle(n);
      if (/(auto|scroll)/.test(style.overflowY) && n.scrollHeight > n.clientHeight) return n;
    }
    return document.scrollingElement;
  }
  function target() {
    const main = document.querySelector('[data-testid="stMain"]') || document.body;
    if (anchor) return document.getElementById(anchor) || main.querySelector('.st-key-' + anchor);
    return main.querySelector(charts);
  }
  function running() {
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : null;
    return state === 'running' || state === 'rerunRequested';
  }
  function drawnAbove(el) {
    const top = el.getBoundingClientRect().top;
    return Array.from(document.querySelectorAll(charts)).every((c) =>
      c.getBoundingClientRect().top >= top
      || (c.matches('.attn-heatmap') || !!c.querySelector('canvas, svg'))
         && c.getBoundingClientRect().height > 0);
  }
  function place() {
    if (stopped) return;
    const el = target(), bar = document.querySelector('.st-key-lesson_bar');
    if (!el || !bar || running()) { still = 0; setTimeout(place, 150); return; }
    idleSince = idleSince ?? Date.now();
    const below = Math.max(bar.getBoundingClientRect().bottom, 60) + 8;
    const top = el.getBoundingClientRect().top;
    const fits = !anchor && top >= below && el.getBoundingClientRect().bottom <= innerHeight;
    if (!fits && Math.abs(top - below) > 2) scroller(el).scrollTop += top - below;
    const now = el.getBoundingClientRect().top;
    still = last !== null && Math.abs(now - last) < 2 && drawnAbove(el) ? still + 1 : 0;
    last = now;
    if (still < 6 && Date.now() - idleSince < 8000) setTimeout(place, 150);
  }
  setTimeout(place, 50);
  setTimeout(stop, 180000);
  void nonce;
})();
</script>"""
"""Shows the step's section first: once the run has ended and the section is on the page,
scrolls until the section's header (or, for a step that names none, the page's first chart)
sits just under the lesson bar, again while the charts above it are still being drawn (their
heights move it), and stops once every chart above it is drawn and it has stayed put for
about a second (8 s at the most after the run ended), or when the learner scrolls, clicks or
types. A run slower than the script's start (a loaded server, a model loading) is waited
for, up to 3 minutes."""
_SCROLL = "_lesson.scroll"  # the step this session arrived at this run (its section first)


def _scroll_on_arrival(step: Step) -> None:
    """On the run that arrives at a step (Next, Back, a lesson's link), show its section
    first (:data:`SCROLL_JS`, run in the page from the sidebar, where it takes no room)."""
    arrived = st.session_state.pop(_SCROLL, None)
    if arrived is None:
        return
    anchor = section_anchor(step.page, step.section) if step.section else ""
    script = SCROLL_JS % {"anchor": json.dumps(anchor), "nonce": json.dumps(arrived)}
    st.sidebar.html(script, unsafe_allow_javascript=True)


def _ask_button(room: str, question_id: str, number: int) -> None:
    """The presenter's one click that puts the step's question to the room."""
    left, right = st.columns([2, 3], vertical_alignment="center")
    right.caption(t(f"room.q_{question_id}"))
    if left.button(t("lesson.ask_step"), key=f"_lesson.ask.{number}", icon="🙋"):
        room_controls.ask_step_question(room, question_id)


def step_link(lesson: Lesson, number: int) -> str:
    """The full link of step ``number`` (this server's address, the step's page and query)."""
    parts = urlsplit(st.context.url or DEFAULT_BASE)
    root = parts.path.rsplit("/", 1)[0]
    page = lesson.steps[number - 1].page
    return f"{parts.scheme}://{parts.netloc}{root}/{page}?{urlencode(step_query(lesson, number))}"


def record_button(lesson: Lesson, number: int, where: DeltaGenerator) -> None:
    """The take-home record's download (:mod:`dashboard.lesson_record`), marked on the last
    step. The record is made when the button is clicked, not when it is drawn: an answer
    given since (in the room's part, drawn after this bar, or in its fragment's own runs)
    and the room's tally at that moment are in it."""
    lang = current_lang()
    links = tuple(step_link(lesson, k) for k in range(1, len(lesson.steps) + 1))
    make = functools.partial(
        current_record,
        lesson,
        lang,
        links,
        seen_polls(),
        room_controls.room_poll_reader(),
        lesson_figures.kept_figures(),
    )
    where.download_button(
        t("lesson.record"),
        make,
        file_name=f"{lesson.name}-{lang}.md",
        mime="text/markdown",
        key="_lesson.record",
        type="primary" if number == len(lesson.steps) else "secondary",
    )


def _moves(
    lesson: Lesson, number: int, last: int, back: DeltaGenerator, ahead: DeltaGenerator
) -> None:
    """Back and Next, each disabled at its end of the lesson."""
    back.button(
        t("lesson.back"),
        key="_lesson.back",
        disabled=number == 1,
        on_click=go_to_step,
        args=(lesson.name, number - 1),
        width="stretch",
    )
    ahead.button(
        t("lesson.next"),
        key="_lesson.next",
        type="primary",
        disabled=number == last,
        on_click=go_to_step,
        args=(lesson.name, number + 1),
        width="stretch",
    )


def _leave() -> None:
    """ "Leave the lesson" (a callback): the lesson's keys leave the link and this session."""
    for key in (LESSON_KEY, STEP_KEY):
        state.forget(key)
