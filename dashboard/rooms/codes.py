"""Room codes: the ``room`` value of a link, checked before anything else sees it."""

from __future__ import annotations

import re

from dashboard.url_values import RefusedValue

MAX_CODE_LEN = 32
_CODE = re.compile(r"[A-Za-z0-9-]+")


def parse_room_code(raw: str) -> str:
    """Return ``raw`` as a room code, refusing anything that is not one.

    A code is 1 to :data:`MAX_CODE_LEN` characters, each an ASCII letter, a digit or ``-``
    (``week3-group-B``): short, readable aloud, safe in a URL and in markdown.

    Args:
        raw: the URL's text.

    Returns:
        The code, unchanged.

    Raises:
        RefusedValue: (a ``ValueError``) naming the value, when it is empty, too long or has
            another character; its reason ``room_code`` lets a link's notice state the rule.
    """
    if not isinstance(raw, str) or not raw:
        raise RefusedValue(f"room code {raw!r} is empty", "room_code", max=MAX_CODE_LEN)
    if len(raw) > MAX_CODE_LEN:
        message = f"room code {raw[:MAX_CODE_LEN]!r}… is longer than {MAX_CODE_LEN}"
        raise RefusedValue(message, "room_code", max=MAX_CODE_LEN)
    if not _CODE.fullmatch(raw):
        message = f"room code {raw!r} may hold only letters, digits and '-'"
        raise RefusedValue(message, "room_code", max=MAX_CODE_LEN)
    return raw
