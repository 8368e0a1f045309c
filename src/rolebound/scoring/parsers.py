"""Answer parsers shared by suites. Anything that does not match is INVALID: counted, never guessed."""

from __future__ import annotations

import re

from ..records import ABCD, INVALID

__all__ = ["INVALID", "parse_first_letter"]

MD = re.compile(r"[*_`~]+")      # markdown emphasis, dropped before a format is matched


_YES_NO_LEAD = re.compile(r"^\W*(?:answer\s*[:：]\s*)?\W*(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str | None) -> str:
    """'Yes' or 'No' when the reply opens with it (after markdown and an optional 'Answer:')."""
    if not text:
        return INVALID
    m = _YES_NO_LEAD.match(MD.sub("", text).strip())
    if not m:
        return INVALID
    return "Yes" if m.group(1).lower() == "yes" else "No"


_LETTER = re.compile(r"\b([A-Z])\b")


def parse_first_letter(text: str | None, letters: str = ABCD) -> str:
    """The first standalone option letter (lm-eval's `first_letter` filter)."""
    if not text:
        return INVALID
    for m in _LETTER.finditer(text):
        if m.group(1) in letters:
            return m.group(1)
    return INVALID
