"""A room link: the query keys a room adds to the usual link, and their checks.

A learner opens the usual link plus ``room=CODE`` (checked by
:func:`dashboard.rooms.codes.parse_room_code`). A follower's link also carries
``room.follow`` (whether the learner follows the presenter or explores on their own) and
``room.server``, the id of the server whose room it followed (:func:`parse_marker`): when the
room is not there, the page says it has ended instead of waiting for it. A presenter's view
leaves these keys out (:func:`shared_params`): they belong to each learner's own link.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

ROOM_KEY = "room"
FOLLOW_KEY = "room.follow"
SERVER_KEY = "room.server"
_MARKER = re.compile(r"[0-9a-f]{1,16}")


@dataclass(frozen=True)
class RoomLink:
    """The room this run belongs to.

    Attributes:
        code: the room's code, ``""`` when the link names none (or a bad one).
        marker: the server id a follower's link carries (``""`` before it followed).
    """

    code: str
    marker: str


def parse_marker(raw: str) -> str:
    """A server id from the URL (hex, at most 16 characters).

    Raises:
        ValueError: naming the value, for anything else.
    """
    if not _MARKER.fullmatch(raw):
        raise ValueError(f"server id {raw!r}")
    return raw


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
