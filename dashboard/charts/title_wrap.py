"""Chart titles broken into lines: Vega clips a title wider than its chart instead of
wrapping it, and the charts in narrow Streamlit columns (the Intuition bars, the Step-by-step
matrices) have titles longer than their width, in English and in Chinese (no Streamlit, no
pandas, no Altair)."""

from __future__ import annotations

import math
import re
import unicodedata

# Display units per line of a wrapped title (a CJK character counts 2): about 250 px of the
# 16 px bold title font. Vega clips a title wider than its chart instead of wrapping it.
TITLE_WRAP_UNITS = 28
_WIDE = ("W", "F")  # East Asian Wide and Fullwidth: two units
_PIECES = re.compile(r"[^\s]+\s*|\s+")
_OPENING = ("Ps", "Pi")  # wide （ 「: never at a line's end
_CLOSING = ("Pe", "Pf")  # ) ” ） 」: never at a line's start
_CJK_STOPS = "，。、：；！？"


def display_units(text: str) -> int:
    """Width of ``text`` in units of a Latin character; a CJK character counts 2."""
    return sum(2 if unicodedata.east_asian_width(ch) in _WIDE else 1 for ch in text)


def _breakable_pieces(text: str) -> list[str]:
    """Words with their trailing spaces, each wide character standing alone (a line may
    break before and after it, as CJK text is written without spaces) except that closing
    punctuation stays with what precedes it and wide opening punctuation with what
    follows."""
    pieces: list[str] = []
    opening = ""
    for word in _PIECES.findall(text):
        run = ""
        for ch in word:
            kind, wide = unicodedata.category(ch), unicodedata.east_asian_width(ch) in _WIDE
            if kind in _OPENING and wide:
                if run:
                    pieces.append(opening + run)
                    opening, run = "", ""
                opening += ch
            elif kind in _CLOSING or ch in _CJK_STOPS:
                if run or opening:
                    run += ch
                elif pieces:
                    pieces[-1] += ch
                else:
                    run = ch
            elif wide:
                if run:
                    pieces.append(opening + run)
                    opening = ""
                run = ch
            else:
                run += ch
        if run:
            pieces.append(opening + run)
            opening = ""
    if opening:
        pieces.append(opening)
    return pieces


def _fitting_prefix(text: str, units: int) -> str:
    """The longest prefix of ``text`` at most ``units`` wide (at least one character)."""
    prefix = ""
    for ch in text:
        if prefix and display_units(prefix + ch) > units:
            break
        prefix += ch
    return prefix


def wrap_title(text: str, units: int = TITLE_WRAP_UNITS) -> list[str]:
    """Break a title into lines at most ``units`` wide, at spaces or around CJK characters,
    and inside a word only when the word alone is wider than a line; as many lines as
    filling each line would give, but of even lengths (no one-word last line).

    Args:
        text: the title. units: >= 1, in :func:`display_units`.

    Returns:
        The lines, without leading or trailing spaces (``[text]`` when it fits).

    Raises:
        ValueError: for ``units`` below 1.
    """
    if units < 1:
        raise ValueError(f"units must be at least 1, got {units}")
    filled = _fill(text, units)
    if len(filled) == 1:
        return filled
    shortest = math.ceil(display_units(" ".join(filled)) / len(filled))
    for width in range(min(shortest, units), units):  # the narrowest as few lines fit in
        lines = _fill(text, width)
        if len(lines) <= len(filled):
            return lines
    return filled


def _fill(text: str, units: int) -> list[str]:
    """Greedy line filling of :func:`wrap_title`: each line takes pieces while they fit."""
    lines: list[str] = []
    line = ""
    for piece in _breakable_pieces(text):
        if line.strip() and display_units((line + piece).rstrip()) > units:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
        while display_units(line.rstrip()) > units:  # one word wider than a line
            head = _fitting_prefix(line, units)
            lines.append(head.rstrip())
            line = line[len(head) :].lstrip()
    if line.strip():
        lines.append(line.strip())
    return lines or [text]
