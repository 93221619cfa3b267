"""Every private part of Streamlit the house leans on, as the pinned Streamlit 1.67 has it.

Each test here is a row of CONTRIBUTING's table of private calls: after a Streamlit upgrade,
the one that fails names the module that must change with it. They read Streamlit's classes
and config (no server): the fast tier runs them.
"""

from __future__ import annotations

import inspect

import pytest
from streamlit import config as st_config
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.runtime import Runtime
from streamlit.runtime.session_manager import ActiveSessionInfo, SessionManager

from dashboard.rooms import push


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_wake_up_reaches_a_session_as_push_expects():
    """``rooms/push.py``: ``Runtime._session_mgr`` (a ``SessionManager``), its
    ``get_active_session_info(session_id)`` giving an ``ActiveSessionInfo`` with ``.session``,
    and the session's ``_event_loop``, ``_client_state`` and ``request_rerun(client_state)``."""
    assert "self._session_mgr" in inspect.getsource(Runtime.__init__)
    assert _parameters(SessionManager.get_active_session_info) == ["self", "session_id"]
    assert "session" in {field.name for field in ActiveSessionInfo.__dataclass_fields__.values()}
    init = inspect.getsource(AppSession.__init__)
    assert "self._event_loop" in init and "self._client_state" in init
    assert _parameters(AppSession.request_rerun) == ["self", "client_state"]


def test_a_wake_up_sends_no_cached_message_hashes_and_keeps_the_rest():
    """The last client state's hash list can name messages the browser dropped
    since; a rerun asked with it sends references the browser cannot resolve ("Cached
    ForwardMsg MISS"). Streamlit turns the list into the run's ``cached_message_hashes``
    (``AppSession.request_rerun``), so the wake-up's state must carry none, and the rest of
    the state (query, page, widgets) must stay as the browser sent it."""
    from streamlit.proto.ClientState_pb2 import ClientState

    last = ClientState()
    last.query_string = "room=r1&decoder.steps=3"
    last.page_script_hash = "abc123"
    last.cached_message_hashes.extend(["h-canvas-code", "h-old-chart"])
    last.widget_states.widgets.add(id="w1", int_value=7)
    state = push.wake_state(last)
    assert list(state.cached_message_hashes) == []
    assert list(last.cached_message_hashes) == ["h-canvas-code", "h-old-chart"]  # a copy
    assert state.query_string == last.query_string
    assert state.page_script_hash == "abc123"
    assert state.widget_states == last.widget_states
    assert "cached_message_hashes=frozenset(client_state.cached_message_hashes)" in (
        inspect.getsource(AppSession.request_rerun)
    )


def test_a_wake_up_that_meets_other_internals_falls_back_to_polling(monkeypatch, caplog):
    """Any failure inside Streamlit's internals (a ``TypeError`` from a changed signature
    too) wakes nobody, is logged once, and leaves followers to their poll."""
    from streamlit import runtime

    class ChangedManager:
        def get_active_session_info(self, session_id, extra):  # a new required argument
            raise AssertionError("not reached")

    class ChangedRuntime:
        _session_mgr = ChangedManager()

    monkeypatch.setattr(runtime, "get_instance", lambda: ChangedRuntime())
    monkeypatch.setattr(push, "_warned", type(push._warned)())
    with caplog.at_level("WARNING", logger=push.__name__):
        assert push.streamlit_waker("a-session") is False
        assert push.streamlit_waker("another") is False
    warnings = [r for r in caplog.records if "follow by polling" in r.getMessage()]
    assert len(warnings) == 1


def test_the_hidden_post_script_gc_option_exists():
    """``.streamlit/config.toml`` sets ``runner.postScriptGC = false``, an option Streamlit
    does not list in its docs (a full collection after every run of every session)."""
    assert "runner.postScriptGC" in st_config._config_options_template


def test_cache_resource_keys_a_function_by_module_qualname_and_source():
    """``dashboard/replay.py`` gives every recorder the module and qualified name of the
    section it draws, since all recorders share one source: Streamlit's cache key must still
    be made of those three (``_make_function_key``)."""
    from streamlit.runtime.caching import cache_utils

    source = inspect.getsource(cache_utils._make_function_key)
    for part in ("__module__", "__qualname__", "getsource"):
        assert part in source, part


@pytest.mark.parametrize(
    "name",
    [
        "BackMsg_pb2.BackMsg.rerun_script",
        "ClientState_pb2.ClientState.page_name",
        "ClientState_pb2.ClientState.query_string",
        "ClientState_pb2.ClientState.widget_states",
        "ClientState_pb2.ClientState.context_info",
        "ClientState_pb2.ContextInfo.url",
        "ForwardMsg_pb2.ForwardMsg.script_finished",
        "ForwardMsg_pb2.ForwardMsg.new_session",
        "ForwardMsg_pb2.ForwardMsg.delta",
    ],
)
def test_the_websocket_messages_the_stream_client_speaks(name):
    """``dashboard/serving/stream_client.py`` speaks Streamlit's frontend protocol with the
    protobufs shipped in ``streamlit.proto``: these messages and fields must be there."""
    import importlib

    module_name, message_name, field = name.split(".")
    message = getattr(importlib.import_module(f"streamlit.proto.{module_name}"), message_name)
    assert field in message.DESCRIPTOR.fields_by_name


def test_a_run_with_no_cached_hashes_sends_no_references():
    """``rooms/push.send_whole_messages`` empties the run context's
    ``cached_message_hashes``: ``ScriptRunContext.enqueue`` sends a reference only for a
    cacheable message whose hash is on that list, and a rerun or page switch
    asked within the run passes the list on."""
    from streamlit.commands import execution_control
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert "cached_message_hashes" in ScriptRunContext.__dataclass_fields__
    enqueue = inspect.getsource(ScriptRunContext.enqueue)
    assert "msg.hash in self.cached_message_hashes" in enqueue
    assert "create_reference_msg(msg)" in enqueue
    source = inspect.getsource(execution_control)
    assert source.count("cached_message_hashes=ctx.cached_message_hashes") >= 1


def test_send_whole_messages_empties_the_running_scripts_list(monkeypatch):
    """The switch itself: inside a run the list is emptied; outside one nothing happens."""
    from types import SimpleNamespace

    from streamlit.runtime import scriptrunner

    assert push.send_whole_messages() is False  # no script run here
    ctx = SimpleNamespace(cached_message_hashes=frozenset({"h-old"}))
    monkeypatch.setattr(scriptrunner, "get_script_run_ctx", lambda: ctx)
    assert push.send_whole_messages() is True
    assert ctx.cached_message_hashes == frozenset()
    broken = SimpleNamespace()
    monkeypatch.setattr(scriptrunner, "get_script_run_ctx", lambda: broken)
    assert push.send_whole_messages() is False


def test_a_run_s_context_names_the_page_its_request_named():
    """``rooms/push.run_page_hash`` reads ``ScriptRunContext.page_script_hash``, which each
    run (a fragment's too) resets to the page of the request it runs: a fragment timer's
    request sent before a page switch reached the browser runs on the page it left."""
    from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert isinstance(ScriptRunContext.page_script_hash, property)
    assert "page_script_hash" in _parameters(ScriptRunContext.reset)
    reset = inspect.getsource(ScriptRunContext.reset)
    assert "set_current_page_script_hash(page_script_hash)" in reset
    run = inspect.getsource(ScriptRunner._run_script)
    assert "rerun_data.page_script_hash" in run
    assert "page_script_hash=page_script_hash" in run


def test_a_fragment_run_on_a_page_the_session_left_goes_back_to_it(monkeypatch):
    """``back_to_full_run_page``: a fragment's run on the page of the last full run does
    nothing; one on another page switches to the full run's page with its query; with no
    run context or no full run noted, nothing happens."""
    from types import SimpleNamespace

    import streamlit
    from streamlit.runtime import scriptrunner

    switched = []
    monkeypatch.setattr(streamlit, "session_state", {})
    monkeypatch.setattr(streamlit, "switch_page", lambda page, **kw: switched.append((page, kw)))
    push.back_to_full_run_page()  # no run, nothing noted
    ctx = SimpleNamespace(page_script_hash="hash-scaling")
    monkeypatch.setattr(scriptrunner, "get_script_run_ctx", lambda: ctx)
    push.back_to_full_run_page()  # nothing noted yet
    page, query = object(), {"room": ["r-1"], "scaling.seq_len": ["12"]}
    push.note_full_run(page, query)
    push.back_to_full_run_page()  # the same page
    assert switched == []
    ctx.page_script_hash = "hash-landing"  # the request of a timer set before the switch
    push.back_to_full_run_page()
    assert switched == [(page, {"query_params": query})]
    monkeypatch.setattr(scriptrunner, "get_script_run_ctx", lambda: SimpleNamespace())
    assert push.run_page_hash() is None  # another Streamlit: logged once, nothing switched
    push.back_to_full_run_page()
    assert len(switched) == 1
