"""A room link: the query keys a room adds to the usual link, and their checks.

A learner opens the usual link plus ``room=CODE`` (checked by
:func:`dashboard.rooms.codes.parse_room_code`). A follower's link also carries
``room.follow`` (whether "Follow the presenter" is on) and ``room.server``, the id of the
server whose room it followed (:func:`parse_marker`): after a restart, or on another replica,
the page says the room has ended instead of waiting for it. A presenter's view leaves these
keys out (:func:`shared_params`): they belong to each learner's own link.

A follower's link also carries ``room.view``, the version of the presenter's view its last
run showed (:func:`parse_view_version`). The browser sends it back with every request, so a
request sent before the browser had that view (a poll of the page's timer that crossed the
run sending the follower on) is told from a learner's own move
(:mod:`dashboard.room_follow`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

ROOM_KEY = "room"
FOLLOW_KEY = "room.follow"
SERVER_KEY = "room.server"
VIEW_KEY = "room.view"
_MARKER = re.compile(r"[0-9a-f]{1,16}")
_VERSION = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class RoomLink:
    """The room this run belongs to.

    Attributes:
        code: the room's code, ``""`` when the link names none (or a bad one).
        marker: the server id a follower's link carries (``""`` before it followed).
        shown: the version of the presenter's view that the request's link says its tab
            shows (``None`` when it says none).
    """

    code: str
    marker: str
    shown: int | None = None


def parse_marker(raw: str) -> str:
    """A server id from the URL (hex, at most 16 characters).

    Raises:
        ValueError: naming the value, for anything else.
    """
    if not _MARKER.fullmatch(raw):
        raise ValueError(f"server id {raw!r}")
    return raw


def parse_view_version(raw: str) -> int:
    """The version of a presenter's view from the URL (a decimal of at most 12 digits).

    Raises:
        ValueError: naming the value, for anything else.
    """
    if not _VERSION.fullmatch(raw):
        raise ValueError(f"view version {raw!r}")
    return int(raw)


def shared_params(query: Mapping[str, str], *, own_keys: Collection[str]) -> dict[str, str]:
    """The query values a presenter shares: all but each learner's own and the room's keys.

    Args:
        query: a run's query values by key.
        own_keys: the keys each learner keeps for themselves (the language, the
            presentation view).

    Returns:
        The values of ``query`` under every other key.
    """
    return {
        key: value
        for key, value in query.items()
        if key not in own_keys and key != ROOM_KEY and not key.startswith(f"{ROOM_KEY}.")
    }
