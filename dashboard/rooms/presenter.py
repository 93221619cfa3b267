"""The process's room state: its one store, its server id and the presenter key.

These belong to the process, like the threads of :mod:`dashboard.runtime`: made on first
use, behind a lock, kept until the process ends. The store keeps the rooms in this process
(:class:`RoomStore`), or, when :data:`REDIS_ENV` or the secret ``redis_url`` names a Redis,
there (:class:`~dashboard.rooms.redis_store.RedisRoomStore`), shared by every replica: then
a change made on another replica wakes this one's followers (:mod:`dashboard.rooms.push`),
and so does the room server's return after an outage.

The presenter key comes from the environment variable :data:`KEY_ENV`, else Streamlit's
secrets (``presenter_key``, which is how Community Cloud sets it), else it is made once
(:func:`secrets.token_urlsafe`) and printed once in the server's terminal. It is compared in
constant time and never logged again.
"""

from __future__ import annotations

import hmac
import os
import secrets
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from dashboard.rooms.store import RoomStore

if TYPE_CHECKING:
    from dashboard.rooms.redis_store import RedisRoomStore

KEY_ENV = "ATTENTION_LAB_PRESENTER_KEY"
SECRET_NAME = "presenter_key"
GENERATED_KEY_BYTES = 12
MAX_KEY_LEN = 200
REDIS_ENV = "ATTENTION_LAB_REDIS_URL"
REDIS_SECRET = "redis_url"

SERVER_ID = secrets.token_hex(4)
"""This process's id: a follower's link carries the id of the server whose room it followed,
so after a restart (or on another replica) the page can say that the room has ended."""

_LOCK = threading.Lock()
_PROCESS: dict[str, object] = {}


def resolve_key(
    environ: Mapping[str, str],
    read_secret: Callable[[], str | None],
    announce: Callable[[str], None],
) -> tuple[str, str]:
    """Find the presenter key: the environment, else the secrets, else a new one.

    Args:
        environ: the process environment (``os.environ``).
        read_secret: returns the ``presenter_key`` secret, or ``None`` when there is none.
        announce: shows a generated key once (the server's terminal).

    Returns:
        ``(key, source)``, source one of ``"environment"``, ``"secrets"``, ``"generated"``.
    """
    for source, value in (("environment", environ.get(KEY_ENV)), ("secrets", read_secret())):
        if value is not None and str(value).strip():
            return str(value).strip(), source
    key = secrets.token_urlsafe(GENERATED_KEY_BYTES)
    announce(key)
    return key, "generated"


def redis_url(environ: Mapping[str, str], read_secret: Callable[[], str | None]) -> str | None:
    """The Redis that holds the rooms: the environment's :data:`REDIS_ENV`, else the secret.

    Args:
        environ: the process environment (``os.environ``).
        read_secret: returns the ``redis_url`` secret, or ``None`` when there is none.

    Returns:
        The URL, or ``None``: the rooms live in this process.
    """
    for value in (environ.get(REDIS_ENV), read_secret()):
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


def secret_named(name: str) -> str | None:
    """``st.secrets[name]``, or ``None`` (Streamlit raises without a file)."""
    import streamlit as st

    try:
        value = st.secrets[name]
    except (KeyError, FileNotFoundError):
        return None
    return None if value is None else str(value)


def _streamlit_secret() -> str | None:
    """``st.secrets["presenter_key"]``, or ``None``."""
    return secret_named(SECRET_NAME)


def _print_key(key: str) -> None:
    print(
        f"Attention Lab: presenter key for this server run: {key}\n"
        f"  (set {KEY_ENV} or the secret {SECRET_NAME!r} to choose your own)",
        file=sys.stderr,
        flush=True,
    )


def presenter_key() -> tuple[str, str]:
    """The process's presenter key and where it came from (made once; see :func:`resolve_key`)."""
    with _LOCK:
        if "key" not in _PROCESS:
            _PROCESS["key"] = resolve_key(os.environ, _streamlit_secret, _print_key)
        return _PROCESS["key"]  # type: ignore[return-value]


def key_matches(given: str) -> bool:
    """Whether ``given`` is the presenter key, compared in constant time (a text longer than
    :data:`MAX_KEY_LEN` never matches)."""
    if not given or len(given) > MAX_KEY_LEN:
        return False
    key, _source = presenter_key()
    return hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8"))


def _wake_followers(code: str, _version: int) -> None:
    """Another replica changed room ``code``: wake this process's followers of it."""
    from dashboard.rooms import push

    push.wake(code)


def new_store(url: str | None) -> RoomStore | RedisRoomStore:
    """A store in this process, or in the Redis at ``url`` (whose other replicas' changes
    wake this process's followers).

    Raises:
        ValueError: for a URL the Redis client cannot read.
    """
    if url is None:
        return RoomStore()
    from dashboard.rooms import push
    from dashboard.rooms.redis_store import RedisRoomStore

    store = RedisRoomStore(url)
    store.subscribe(_wake_followers, on_back=push.wake_all)
    return store


def shared_store() -> RoomStore | RedisRoomStore:
    """The process's one store (see the module's docstring)."""
    with _LOCK:
        if "store" not in _PROCESS:
            url = redis_url(os.environ, lambda: secret_named(REDIS_SECRET))
            _PROCESS["store"] = new_store(url)
        return _PROCESS["store"]  # type: ignore[return-value]
