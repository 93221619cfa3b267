"""Wake a room's followers the moment the presenter's view changes.

Streamlit has no public way to rerun another session, so this module holds the room's two
uses of its internals. A follower's page polls the room every
:data:`dashboard.room_follow.POLL_S` seconds; on its own that puts up to one poll interval
between the presenter's move and the follower's rerun. Each following session registers
here (its Streamlit session id); when the presenter's run publishes a new view, :func:`wake`
asks each registered session for a rerun at once, the way Streamlit's own "run on save" does
(``AppSession.request_rerun`` with the session's last client state, scheduled on the
server's event loop). The follower's run then applies the presenter's view before it draws
anything; :func:`wake_all` wakes every follower when the room server is back.

The wake-up's client state carries no cached-message hashes (:func:`wake_state`). The
browser lists the large messages it has cached with each rerun it asks for, and the server
then sends a reference instead of any message on that list; but the browser drops a cached
message two runs after it last used it, so the list in the session's *last* client state can
name messages the browser no longer has. A reference to one ends the tab under Streamlit's
"Cached ForwardMsg MISS" (seen when a follower on Intuition was sent to the decoder, whose
canvas heatmap's code it had cached runs before). Without the list every message of a
wake-up is sent whole: a few kilobytes more per follower, never a broken tab.

A follower's *own* requests (its poll timer's) can meet the same end. The browser ages its
cache when a run finishes after a new session message arrived since its last request; a
wake-up that starts while the follower's poll request is on its way is such a run, so the
poll's list, taken before, can name messages that the wake-up's end dropped, and the poll's
run (which sends the follower on when the presenter moved again) references them. Reproduced
by ``tests/dashboard/test_room_cache.py``, whose followers keep the browser's cache by its
rules: misses in one run of three, references on every run. So a follower's every run sends
its messages whole (:func:`send_whole_messages`): two to three times the bytes of a move
(measured on Playground, Heads and the decoder), only for followers; the presenter and
learners outside a room keep the cache, whose lists Streamlit keeps right for runs the
browser asks for itself.

A page switch the server makes (a wake-up, or a follower's poll that sends it on) meets one
more race: the browser's fragment timers go on asking for reruns of the page it still shows
until the new page's first message reaches it. Streamlit runs such a request after the new
page's run, on the *old* page: the browser takes it for a page change, clears the page and
draws the fragment alone (a follower left with its "Following" line and nothing else, seen
under load and reproduced by ``tests/browser/test_rooms_in_browser.py`` with a 0.3 s poll).
Every full run notes its page as it starts (:func:`note_full_run`), and each of the room's
fragments first sends a run on another page back to that page whole
(:func:`back_to_full_run_page`).

This reaches into Streamlit's runtime (``Runtime._session_mgr``, ``AppSession._client_state``
and ``AppSession._event_loop``, ``ScriptRunContext.page_script_hash``, Streamlit 1.67): when
any of it is missing, :func:`wake` wakes nobody and says so once in the server's log, and
followers still follow by polling.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

WAKE_DELAY_S = 0.05
"""Followers rerun this long after the presenter's run woke them: thirty reruns at once
hold the event loop back, and the presenter's own page (its last messages, still queued)
would reach the presenter after theirs (measured: the presenter's run 0.26-0.30 s with
thirty followers not woken, 0.8-1.0 s when woken at once). All followers are woken
together: thirty reruns share the GIL and end together anyway, and a stagger only delayed
the last (20 ms apart held the 30th back 0.6 s)."""
MAX_FOLLOWERS = 500
"""Sessions kept per room; a room past it wakes the newest and polls for the others."""

_LOG = logging.getLogger(__name__)

Waker = Callable[[str, float], bool]
"""Asks the session with this id for a rerun in this many seconds; ``False`` when it has
gone."""


class FollowerRegistry:
    """The following sessions of each room (thread-safe, bounded per room)."""

    def __init__(self, max_followers: int = MAX_FOLLOWERS):
        self.max_followers = max_followers
        self._rooms: dict[str, dict[str, None]] = {}
        self._lock = threading.Lock()

    def register(self, code: str, session_id: str) -> None:
        """Note that ``session_id`` follows room ``code`` (the oldest drops out when full)."""
        with self._lock:
            followers = self._rooms.setdefault(code, {})
            followers.pop(session_id, None)
            followers[session_id] = None
            while len(followers) > self.max_followers:
                del followers[next(iter(followers))]

    def forget(self, code: str, session_id: str) -> None:
        """``session_id`` no longer follows room ``code``."""
        with self._lock:
            self._rooms.get(code, {}).pop(session_id, None)

    def codes(self) -> list[str]:
        """The rooms that have followers here."""
        with self._lock:
            return [code for code, followers in self._rooms.items() if followers]

    def followers(self, code: str) -> list[str]:
        """The session ids following room ``code``, oldest first."""
        with self._lock:
            return list(self._rooms.get(code, {}))

    def wake(self, code: str, waker: Waker) -> int:
        """Ask every follower of room ``code`` for a rerun in :data:`WAKE_DELAY_S`; sessions
        that have gone are forgotten.

        Returns:
            How many sessions were woken.
        """
        woken = 0
        for session_id in self.followers(code):
            if waker(session_id, WAKE_DELAY_S):
                woken += 1
            else:
                self.forget(code, session_id)
        return woken


_REGISTRY = FollowerRegistry()
_warned = threading.Event()
_warned_hashes = threading.Event()


def registry() -> FollowerRegistry:
    """The server process's registry (rooms live in one process)."""
    return _REGISTRY


def this_session() -> str:
    """The Streamlit session id of the running script (``""`` outside a script run)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


_FULL_RUN = "_push.full_run"  # (page script hash, st.Page, query) of the last full run
_warned_page = threading.Event()


def run_page_hash() -> str | None:
    """The script hash of the page this run draws (Streamlit's run context); ``None``
    outside a script run or when the context no longer has it (logged once)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    page_hash = getattr(ctx, "page_script_hash", None) if ctx is not None else None
    if ctx is not None and not isinstance(page_hash, str):
        if not _warned_page.is_set():
            _warned_page.set()
            _LOG.warning("rooms: the run context has no page script hash")
        return None
    return page_hash


def note_full_run(page, query: dict[str, list[str]]) -> None:
    """At the start of every full run (once ``st.navigation`` chose the page): keep the page
    it draws (an ``st.Page``) and its link's query, for :func:`back_to_full_run_page`. At the
    start, not the end: a run that a newer one stops is still the page the browser is sent
    to."""
    import streamlit as st

    st.session_state[_FULL_RUN] = (run_page_hash(), page, query)


def back_to_full_run_page() -> None:
    """At the start of a fragment's run: when the run is on another page than the last full
    run (a timer's request the browser sent before the server's page switch reached it, see
    the module docstring), switch back to that page with its query, which ends the run and
    draws the page whole. Does nothing otherwise, or when the page is not known."""
    import streamlit as st

    kept = st.session_state.get(_FULL_RUN)
    now = run_page_hash()
    if kept is None or now is None or kept[0] is None or kept[0] == now:
        return
    _LOG.info("a fragment's run on a page the session left: back to the page whole")
    st.switch_page(kept[1], query_params=kept[2])


def send_whole_messages() -> bool:
    """Make the running script send every message whole, never a reference to one the
    browser cached (a follower's runs, see the module docstring): the run's cached-message
    hashes are emptied, and a rerun or page switch this run asks for inherits the empty list.

    Returns:
        ``False`` outside a script run or when Streamlit's run context no longer has the
        list (logged once; the run then uses the browser's list as Streamlit does).
    """
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return False
    if not isinstance(getattr(ctx, "cached_message_hashes", None), frozenset):
        if not _warned_hashes.is_set():
            _warned_hashes.set()
            _LOG.warning("rooms: the run context has no cached-message hashes to empty")
        return False
    ctx.cached_message_hashes = frozenset()
    return True


def wake_state(client_state):
    """A copy of a session's last ``ClientState`` (its query, page and widget values) for a
    rerun the server asks for, without the cached-message hashes that the browser may have
    dropped since it sent them (see the module docstring). The rest stays as the browser
    sent it: a follower's run gives its controls the room's values whatever the request
    carried (:mod:`dashboard.room_follow`)."""
    from streamlit.proto.ClientState_pb2 import ClientState

    state = ClientState()
    state.CopyFrom(client_state)
    state.ClearField("cached_message_hashes")
    return state


def streamlit_waker(session_id: str, delay_s: float = 0.0) -> bool:
    """Ask the Streamlit session ``session_id`` for a rerun with its last client state (less
    its cached-message hashes, :func:`wake_state`) in ``delay_s`` seconds, on the server's
    event loop; ``False`` when the session has gone or the runtime's internals are not what
    this module expects (logged once)."""
    from streamlit import runtime

    try:
        manager = runtime.get_instance()._session_mgr
        info = manager.get_active_session_info(session_id)
        if info is None:
            return False
        session = info.session
        loop = session._event_loop
        loop.call_soon_threadsafe(
            loop.call_later,
            delay_s,
            lambda: session.request_rerun(wake_state(session._client_state)),
        )
        return True
    except Exception as err:  # noqa: BLE001 - any change of Streamlit's internals: poll instead
        if not _warned.is_set():
            _warned.set()
            _LOG.warning("rooms: cannot wake followers (%s); they follow by polling", err)
        return False


def wake_all(waker: Waker = streamlit_waker) -> int:
    """Wake every follower of every room (the room server is back after an outage: each
    follower's run reads its room again).

    Returns:
        How many sessions were asked for a rerun.
    """
    return sum(_REGISTRY.wake(code, waker) for code in _REGISTRY.codes())


def wake(code: str, waker: Waker = streamlit_waker) -> int:
    """Wake every follower of room ``code`` (see the module's docstring).

    Returns:
        How many sessions were asked for a rerun.
    """
    return _REGISTRY.wake(code, waker)
