"""Untrusted text shown as literal text in Streamlit markdown: never a link, never markup.

Streamlit renders the text of ``st.warning``, ``st.error`` and ``st.markdown`` as
GitHub-flavoured markdown, and its autolink step (remark-gfm's "autolink literal") turns any
``http://…``, ``https://…``, ``www.…`` or ``name@host.tld`` found in a *text* node into a live
link. It runs after backslash escapes are resolved, so escaping the markdown specials leaves
``http\\://evil.example`` a link. Streamlit's icon (``:material/…:``) and emoji shortcodes
are replaced in text nodes too.

Text inside an inline code span is not a text node: it is shown as written, with no links,
images, HTML, icons, colour directives or maths (Streamlit 1.67 does still show a
``:material/home:`` inside one as ``:material_home:``). :func:`literal` puts a value in
a code span whose backtick fence is longer than any run of backticks in the value (CommonMark's
rule for code spans), so no value can close the span early. This module imports nothing
heavy (no torch), so that :mod:`dashboard.state` can use it on every page.
"""

from __future__ import annotations

import re
import unicodedata

VALUE_MAX_LEN = 40
DETAIL_MAX_LEN = 120
ELLIPSIS = "…"
REPLACEMENT = "?"
_BACKTICK_RUN = re.compile(r"`+")


def literal(value: object, max_len: int = VALUE_MAX_LEN) -> str:
    """Return ``value`` as a markdown inline code span that renders exactly as its text.

    Args:
        value: untrusted text (or anything ``str()`` turns into text), e.g. a tampered query
            value or an error message that quotes one.
        max_len: at most this many characters of the value are kept (a positive whole
            number, set by the caller); a longer value is cut and ends in "…".

    Returns:
        Markdown: a fence of backticks, a space, the text, a space and the fence again, e.g.
        ``"` http://evil.example/x `"``. Control, format and private-use characters
        (newlines, zero-width and bidirectional marks) are replaced by "?".
    """
    text = "".join(
        REPLACEMENT if unicodedata.category(c).startswith("C") else c for c in str(value)
    )
    if len(text) > max_len:
        text = text[:max_len] + ELLIPSIS
    longest_run = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * (longest_run + 1)
    # one space each side: CommonMark strips exactly one, so a value that starts or ends with a
    # backtick cannot merge with the fence
    return f"{fence} {text} {fence}"


_ASCII_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # CommonMark's escapable characters
_NOT_IN_ENTITY = re.compile(r"([!-%'-/:<-@\[-`{-~])")  # all but "&" and ";"
_WWW = re.compile(r"(www)(\\\.)", re.IGNORECASE)
JOINER = "\u2060"
"""WORD JOINER: an invisible character that :func:`plain` puts after every ``:`` and ``@``
and inside ``www.``, where an autolink, an emoji or icon shortcode would start."""


def _one_line(text: str) -> str:
    """``text`` with each control, format and private-use character (a newline, a tab, a
    zero-width or bidirectional mark) replaced by a space."""
    return "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(text))


def _unlinked(escaped: str) -> str:
    """Escaped text with :data:`JOINER` after each ``:`` and ``@`` and inside ``www.``: no
    ``http://``, ``www.``, ``name@host`` (links that a renderer finds in plain text, after
    escapes), ``:smile:`` or ``:material/home:`` is left whole."""
    joined = escaped.replace(":", ":" + JOINER).replace("@", "@" + JOINER)
    return _WWW.sub(lambda m: m.group(1) + JOINER + m.group(2), joined)


def plain(text: object) -> str:
    """Untrusted text of any length (a question typed to the room, a lesson file's title,
    what to notice or an error naming a file) as Streamlit markdown that shows it as itself,
    on one line: every ASCII punctuation character backslash-escaped (no heading, emphasis,
    list, link, image, HTML, ``$`` maths or ``:red[…]`` colour), links that a renderer finds
    in plain text and shortcodes broken by :data:`JOINER`, and control characters (a
    newline) turned into spaces."""
    return _unlinked(_ASCII_PUNCTUATION.sub(r"\\\1", _one_line(text)))


def plain_html(text: object) -> str:
    """Untrusted text as Markdown that any viewer shows as itself, HTML allowed or not (a
    take-home record): ``&``, ``<`` and ``>`` as HTML entities (no tag, no ``onerror=``),
    the rest as :func:`plain` does (no link, ``javascript:`` or otherwise, and no image)."""
    text = _one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _unlinked(_NOT_IN_ENTITY.sub(r"\\\1", text))
