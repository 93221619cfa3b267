"""When the room server cannot be reached: one line, and the page goes on.

With rooms in Redis (replicas), every call of the room store can raise
:class:`~dashboard.rooms.store.RoomServerUnreachable` while Redis is down or restarting.
:func:`room_reach` runs one part of a room's page: a refusal becomes one warning in the
page's language (the learner's page keeps working on their own view) and is remembered for
the session; the polling fragments keep asking, so the room resumes by itself when the
server is back (:func:`server_back` says when, once). A room that Redis forgot has ended, and
the usual notice says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.i18n import t
from dashboard.literal import literal
from dashboard.rooms.store import RoomServerUnreachable

UNREACHABLE = "_room.unreachable"
"""Session key: the room server could not be reached at this session's last try."""


@contextlib.contextmanager
def room_reach(
    code: str, where: DeltaGenerator | None = None, *, say: bool = True
) -> Iterator[None]:
    """Run a room's part; a room server that cannot be reached is said in one line.

    Args:
        code: the room's code, for the notice.
        where: where the notice goes (default: where the call is drawing).
        say: False to remember the refusal without a notice (a part drawn before the
            page, whose notice the room's part after the page gives).

    Yields:
        Nothing; the block runs inside.
    """
    try:
        yield
    except RoomServerUnreachable:
        st.session_state[UNREACHABLE] = True
        if say:
            (where or st).warning(t("room.unreachable", code=literal(code)))


def server_back() -> bool:
    """Whether the room server answered again after this session could not reach it (True
    once; the caller has just reached it)."""
    return bool(st.session_state.pop(UNREACHABLE, False))
