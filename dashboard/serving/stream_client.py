"""A light Streamlit client: one app session over the websocket, no browser.

It speaks the protocol of Streamlit's own frontend (1.67): it connects to ``/_stcore/stream``
with the subprotocol ``streamlit``, asks for a run with a ``BackMsg.rerun_script`` carrying a
``ClientState`` (the page's URL path as ``page_name`` on the first run, then the page script
hash from ``NewSession``, or from ``Navigation`` in an ``st.navigation`` app; the query
string; the widget states), and reads ``ForwardMsg``s
until ``script_finished``. Sliders are found in the ``Delta`` elements (their id, range, step
and value), so a move is: send the rerun with one slider's new value, wait for the script's
finished message. Messages are the protobufs shipped in ``streamlit.proto``.

It keeps the browser's cache of large messages by the frontend's own rules
(:class:`MessageCache`): every rerun it asks for lists the hashes it holds, so the server
sends a reference instead of a message on that list, and a reference to a message it no
longer holds is recorded in :attr:`MessageCache.misses` (where the browser's tab dies under
"Cached ForwardMsg MISS").

What a browser does that this client does not: draw anything, send component or other widget
values it never touched (the server keeps the last value of a widget a rerun leaves out),
send heartbeats (the websocket's own pings keep it open).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect

STREAM_PATH = "/_stcore/stream"
SUBPROTOCOL = "streamlit"
RUN_TIMEOUT_S = 300.0
"""The longest one run may take: a real model's first run on a machine that also runs other
servers (Heads at work's census of 270 heads: 47 s on one quiet core of an AMD EPYC, two
replicas warming at once and a test run beside them share two cores)."""
OPEN_TIMEOUT_S = 60.0
"""The longest the websocket's opening handshake may take on a busy server."""
FINISHED_OK = (
    ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY,
    ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
)
EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
ERROR_TEXT_LEN = 200


@dataclass
class _Cached:
    """One cached message: its bytes, the run count when last used, its fragment."""

    encoded: bytes
    used_at_run: int
    fragment_id: str


class MessageCache:
    """The browser's cache of large messages, by the rules of Streamlit 1.67's frontend
    (``ForwardMessageCache`` and the app's script-finished handler):

    * a message the server marks ``metadata.cacheable`` is kept under its hash; a message or
      a reference that names a kept hash marks it used in the current run;
    * each run that finishes (successfully, or a fragment run; not one that ended early for a
      rerun), *if a new session message came since the client last asked for a rerun*,
      counts one run and drops what was last used more than ``max_cached_message_age`` runs
      ago (a fragment run only looks at that fragment's messages);
    * a reference to a hash it does not hold is a miss: the browser stops drawing the app and
      shows "Cached ForwardMsg MISS"; here it is recorded in :attr:`misses`.
    """

    def __init__(self) -> None:
        self.messages: dict[str, _Cached] = {}
        self.run_count = 0
        self.max_age = 2  # replaced by the server's NewSession config
        self.misses: list[str] = []
        self.references = 0  # references received (hits and misses)
        self._new_session_seen = False

    def hashes(self) -> list[str]:
        """The hashes a rerun request lists (every message held now)."""
        return list(self.messages)

    def asked_for_rerun(self) -> None:
        """The client sent a rerun request: runs finishing before its new session message
        do not age the cache (the frontend's ``hasReceivedNewSession``)."""
        self._new_session_seen = False

    def receive(self, forward: ForwardMsg, raw: bytes) -> ForwardMsg | None:
        """Apply the cache to one incoming message: the message itself, the cached message
        a reference names (with the reference's metadata), or ``None`` for a miss."""
        kind = forward.WhichOneof("type")
        if kind == "new_session":
            self.max_age = forward.new_session.config.max_cached_message_age
            self._new_session_seen = True
        elif kind == "script_finished":
            self._finished(forward)
        elif kind == "ref_hash":
            self.references += 1
            held = self.messages.get(forward.ref_hash)
            if held is None:
                self.misses.append(forward.ref_hash)
                return None
            held.used_at_run = self.run_count
            cached = ForwardMsg.FromString(held.encoded)
            cached.metadata.CopyFrom(forward.metadata)
            return cached
        if forward.metadata.cacheable and forward.hash:
            held = self.messages.get(forward.hash)
            if held is not None:
                held.used_at_run = self.run_count
            else:
                fragment = forward.delta.fragment_id if kind == "delta" else ""
                self.messages[forward.hash] = _Cached(raw, self.run_count, fragment)
        return forward

    def _finished(self, forward: ForwardMsg) -> None:
        if forward.script_finished == EARLY_FOR_RERUN or not self._new_session_seen:
            return
        fragments = set(forward.metadata.run.fragment_ids)
        self.run_count += 1
        for key, held in list(self.messages.items()):
            if fragments and held.fragment_id not in fragments:
                continue
            if self.run_count - held.used_at_run > self.max_age:
                del self.messages[key]


@dataclass
class Slider:
    """A slider as the server described it: id, range, step and current value(s)."""

    id: str
    label: str
    low: float
    high: float
    step: float
    value: list[float]

    def moved(self, steps: int) -> list[float]:
        """The value ``steps`` steps away (negative: to the left), kept within the range."""
        target = min(max(self.value[0] + steps * self.step, self.low), self.high)
        return [target, *self.value[1:]]


@dataclass
class RunResult:
    """What one script run sent: how long it took and the errors it showed."""

    seconds: float
    status: int
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in FINISHED_OK and not self.errors


class StreamSession:
    """One app session, as one browser tab holds it.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8501"``.
        page: the page's URL path (``""`` for the default page).
        query: the query string of the link the user opened, without ``?``.
    """

    def __init__(self, base_url: str, page: str = "", query: str = ""):
        parts = urlsplit(base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        self.url = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}{STREAM_PATH}"
        self.base_url = base_url.rstrip("/")
        self.page, self.query = page, query
        self.page_script_hash = ""
        self.sliders: dict[str, Slider] = {}  # every slider seen, by widget key
        self.shown: list[str] = []  # keys of the sliders the last run drew, in page order
        self.elements: list[Element] = []  # every element the last run drew, in order sent
        self.fragment_id = ""  # the last fragment a run drew (its timer's reruns name it)
        self.cache = MessageCache()
        self.page_hashes: dict[str, str] = {}  # URL path -> page script hash (st.navigation)
        self._socket: ClientConnection | None = None

    async def open(self) -> RunResult:
        """Connect and run the page once (what opening the link does). A run that sends the
        browser on (the root address forwards to the landing page; a room's follower goes
        to the presenter's page) ends early and the app runs again by itself: the result is
        the time until the page it landed on finished."""
        self._socket = await connect(
            self.url,
            subprotocols=[SUBPROTOCOL],
            max_size=None,
            proxy=None,
            # a server busy with a model's first run answers a handshake or a ping late (the
            # library's 10 s and 20 s): the caller's own wait for the run bounds the session
            open_timeout=OPEN_TIMEOUT_S,
            ping_interval=None,
        )
        started = time.perf_counter()
        result = await self.rerun()
        while result.status == EARLY_FOR_RERUN:
            result = await self.finish_run()
        return RunResult(time.perf_counter() - started, result.status, result.errors)

    async def close(self) -> None:
        """Close the websocket (the server ends the session)."""
        if self._socket is not None:
            await self._socket.close()
            self._socket = None

    async def move_slider(self, key: str, steps: int) -> RunResult:
        """Move the slider with widget key ``key`` by ``steps`` steps; wait for the run."""
        slider = self.sliders[key]
        slider.value = slider.moved(steps)
        return await self.rerun()

    def _widget_states(self) -> list[WidgetState]:
        states = []
        for slider in (self.sliders[key] for key in self.shown):
            state = WidgetState(id=slider.id)
            state.double_array_value.data.extend(slider.value)
            states.append(state)
        return states

    async def rerun(self) -> RunResult:
        """Ask for a run with the current widget values; wait for its finished message.

        Returns:
            The time from sending the request to the script's finished message, the
            finishing status, and the exceptions and error boxes the run drew.

        Raises:
            TimeoutError: when the run does not finish within :data:`RUN_TIMEOUT_S`.
            RuntimeError: when the session is not open.
        """
        await self.ask_rerun()
        return await self.finish_run()

    async def ask_rerun(self) -> None:
        """Ask for a run with the current widget values without waiting for it (a second
        request while a run is under way starts a new run beside the old one, as a browser's
        does: Streamlit's ``runner.fastReruns``).

        Raises:
            RuntimeError: when the session is not open.
        """
        if self._socket is None:
            raise RuntimeError("the session is not open; call open() first")
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_script_hash = self.page_script_hash
        if not self.page_script_hash:
            state.page_name = self.page
        state.widget_states.widgets.extend(self._widget_states())
        state.context_info.url = self.address()  # as a browser says where it is
        await self.send_rerun(msg)

    def address(self) -> str:
        """The page's address as a browser's address bar shows it (``st.context.url``)."""
        return f"{self.base_url}/{self.page}" + (f"?{self.query}" if self.query else "")

    async def switch_page(self, path: str, query: str) -> RunResult:
        """Go to the page at URL path ``path`` with ``query`` (what a click in the sidebar's
        navigation does); wait for the run.

        Raises:
            ValueError: when no page of the app has that path.
        """
        if path not in self.page_hashes:
            raise ValueError(f"no page at {path!r}; the app has {sorted(self.page_hashes)}")
        self.page_script_hash, self.query, self.shown = self.page_hashes[path], query, []
        return await self.rerun()

    async def send_rerun(self, msg: BackMsg) -> None:
        """Send a rerun request listing the cached messages' hashes, as the browser does."""
        msg.rerun_script.cached_message_hashes.extend(self.cache.hashes())
        await self._socket.send(msg.SerializeToString())
        self.cache.asked_for_rerun()

    async def receive(self) -> tuple[ForwardMsg | None, str | None]:
        """The next message from the server through the cache, and its kind (``None, None``
        for a reference to a message the cache no longer holds: a miss)."""
        raw = await self._socket.recv(decode=False)
        forward = self.cache.receive(ForwardMsg.FromString(raw), raw)
        return forward, None if forward is None else forward.WhichOneof("type")

    async def finish_run(self) -> RunResult:
        """Read the messages of the run under way until its finished message."""
        started = time.perf_counter()
        errors: list[str] = []
        self.shown, self.elements = [], []
        async with asyncio.timeout(RUN_TIMEOUT_S):
            while True:
                forward, kind = await self.receive()
                if forward is None:
                    errors.append("a reference to a message the browser no longer holds")
                    continue
                if kind == "script_finished":
                    return RunResult(time.perf_counter() - started, forward.script_finished, errors)
                self._read(forward, kind, errors)

    def _read(self, forward: ForwardMsg, kind: str | None, errors: list[str]) -> None:
        """Keep what later runs need (page hash, query string, sliders); collect errors."""
        if kind == "new_session":
            self.page_script_hash = forward.new_session.page_script_hash
        elif kind == "navigation":  # st.navigation names the page that ran, and every page
            self.page_script_hash = forward.navigation.page_script_hash
            for app_page in forward.navigation.app_pages:
                self.page_hashes[app_page.url_pathname] = app_page.page_script_hash
        elif kind == "page_info_changed":
            self.query = forward.page_info_changed.query_string
        if kind == "delta" and forward.delta.fragment_id:
            self.fragment_id = forward.delta.fragment_id
        if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
            element = forward.delta.new_element
            self.elements.append(element)
            which = element.WhichOneof("type")
            if which == "slider":
                self._keep_slider(element.slider)
            elif which == "exception":
                errors.append(f"exception: {element.exception.message}"[:ERROR_TEXT_LEN])
            elif which == "alert" and element.alert.format == Alert.Format.ERROR:
                errors.append(f"error box: {element.alert.body}"[:ERROR_TEXT_LEN])

    def _keep_slider(self, proto) -> None:
        """Record a drawn slider under its widget key. Its id changes with its range (e.g. a
        window size whose maximum follows L); the value is then the one this session had."""
        key = proto.id.split("-", 2)[-1]  # ids read "$$ID-<hash>-<key>"
        known = self.sliders.get(key)
        if proto.set_value:
            value = list(proto.value)
        elif known is not None:
            value = [min(max(v, proto.min), proto.max) for v in known.value]
        else:
            value = list(proto.default)
        self.shown.append(key)
        self.sliders[key] = Slider(proto.id, proto.label, proto.min, proto.max, proto.step, value)
