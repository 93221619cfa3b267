"""The words of the link notice: what :func:`dashboard.state.render_notices` shows when a
part of the link could not be used, with why, in the page's language.

Every key and value is untrusted text from the link: each is shown through
:func:`dashboard.literal.literal` (an inline code span), never as markdown or a link. The
reasons are the codes of :class:`dashboard.url_values.RefusedValue`, each with its locale key
``common.url_reason_<code>``; an unknown key has its own line and, when a key the page uses is
close to it, that key (``Did you mean …?``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dashboard.i18n import t
from dashboard.literal import literal

UNKNOWN_KEY = "unknown_key"
"""The reason of a query key that no control used (not a code of ``REASONS``)."""


@dataclass(frozen=True)
class Notice:
    """A part of the link that was not used, and why.

    Attributes:
        key: the query key. raw: its value as given.
        reason: a reason code of :data:`dashboard.url_values.REASONS`, or :data:`UNKNOWN_KEY`.
        detail: the reason's values as ``(name, value)`` pairs (``low``/``high``, ``max``,
            ``char``; ``suggestion`` for an unknown key).
    """

    key: str
    raw: str
    reason: str
    detail: tuple[tuple[str, Any], ...] = field(default=())


def notice_line(notice: Notice) -> str:
    """One notice as a line of markdown in the page's language.

    Args:
        notice: a refused value or an unknown key.

    Returns:
        The key and value as literal text, then why (for an unknown key, the likely
        intended key when there is one), e.g.
        ``"` playground.seq_len ` = ` 2000 `: outside the allowed range 4 to 1024."``.
    """
    detail = dict(notice.detail)
    key, value = literal(notice.key), literal(notice.raw)
    if notice.reason != UNKNOWN_KEY:
        reason = t(f"common.url_reason_{notice.reason}", **detail)
        return t("common.url_notice_item", key=key, value=value, reason=reason)
    line = t("common.url_notice_unknown", key=key, value=value)
    if "suggestion" in detail:
        line += " " + t("common.url_notice_suggest", key=literal(detail["suggestion"]))
    return line


def notices_markdown(found: Sequence[Notice]) -> str:
    """The body of the one link warning: a title, then one bullet per notice.

    Args:
        found: this run's notices, in order (at least one).

    Returns:
        Markdown for ``st.warning``.
    """
    lines = "\n".join(f"- {notice_line(n)}" for n in found)
    return t("common.url_notice_title") + "\n\n" + lines
