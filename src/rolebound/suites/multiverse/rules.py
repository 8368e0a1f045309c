"""A rule-based thinking/acting segmenter: our fallback, not the paper's method.

Used only when the LLM segmenter's reply has no valid <thinking>/<acting> spans (the bundled
model never writes them), and labelled `segmenter: rules` in the record, so the report keeps its
Think-Act Matching apart from the LLM segmenter's. It reads the reply being analysed, never the
segmenter's reply.

Rules, following the segmenter prompt ("the final response or action" is acting):
- the reply is cut into sentences (lines, then sentence ends); a line ending in ":" joins the
  next ("The answer is:" / "C) Bruce Wayne"); fragments with fewer than two words of two or more
  letters ("A:", "A: A: A:") are dropped, a sentence repeated verbatim counts once, and when the
  reply hit its token cap, an unfinished last sentence is dropped;
- acting: a sentence that commits to an answer (scoring.choice reads one of the
  question's options in it, or it says "the answer is", "I choose", "I decide", "my choice"; a
  sentence that only states one option's text counts when the whole reply answers that way); if
  none does, the last sentence;
- thinking: every other sentence; consecutive sentences of one kind form one span, and spans pair
  in order as the release zips the LLM's spans.
A reply without at least one sentence of each kind is INVALID.
"""

from __future__ import annotations

import re

from ...scoring.choice import choice_reading
from ...records import INVALID
from .prompts import LETTERS

RULES = "rules"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(A-Z])")
_ENDS = (".", "!", "?", '"', "”", ")")
_WORD = re.compile(r"[A-Za-z]{2,}")
_COMMITS = re.compile(r"(?i)\b(?:the\s+(?:correct\s+|final\s+)?answer\s+is|my\s+(?:final\s+)?(?:answer|choice|decision)"
                      r"|i\s+(?:choose|chose|decide|decided|pick)\b)")


def sentences(text: str, cut: bool = False) -> list[str]:
    lines: list[str] = []
    for line in (s.strip() for s in text.splitlines()):
        if not line:
            continue
        if lines and lines[-1].endswith(":"):
            lines[-1] += " " + line
        else:
            lines.append(line)
    out, seen = [], set()
    for line in lines:
        for s in _SENTENCE_END.split(line):
            s = s.strip()
            norm = " ".join(s.lower().split())
            if len(_WORD.findall(s)) < 2 or norm in seen:
                continue
            seen.add(norm)
            out.append(s)
    if cut and out and out[-1] == _last(lines) and not out[-1].endswith(_ENDS):
        out.pop()
    return out


def _last(lines: list[str]) -> str:
    return _SENTENCE_END.split(lines[-1])[-1].strip() if lines else ""


# without the question's options, the letters alone (a reply names them "A)", "option B", ...)
_LETTERS_ONLY = [(L, "") for L in LETTERS]


def is_acting(sentence: str, options: list[tuple[str, str]] | None = None, stated: int | None = None) -> bool:
    """stated: the option the whole reply answers by stating its text (rule stated_text), if any. A
    sentence that only mentions one option's text ("Mary Jane Watson is in the MCU.") is analysis
    unless the reply's answer is read that way."""
    r = choice_reading(sentence, options or _LETTERS_ONLY)
    if r.value is not None and (r.rule != "stated_text" or r.value == stated):
        return True
    return bool(_COMMITS.search(sentence))


def rule_segments(text: str | None, cut: bool = False, options: list[tuple[str, str]] | None = None) -> dict | str:
    """{'thinking': [...], 'acting': [...], 'segmenter': 'rules'} or INVALID (see the module doc).
    cut: the reply stopped at its token cap; options: (label, text) as the question showed them."""
    sents = sentences(text or "", cut)
    if len(sents) < 2:
        return INVALID
    whole = choice_reading(text, options) if options else None
    stated = whole.value if whole is not None and whole.rule == "stated_text" else None
    kinds = [is_acting(s, options, stated) for s in sents]
    if not any(kinds):
        kinds[-1] = True
    if all(kinds):
        return INVALID
    spans: list[tuple[bool, list[str]]] = []
    for s, acting in zip(sents, kinds):
        if spans and spans[-1][0] == acting:
            spans[-1][1].append(s)
        else:
            spans.append((acting, [s]))
    return {"thinking": [" ".join(ss) for a, ss in spans if not a],
            "acting": [" ".join(ss) for a, ss in spans if a], "segmenter": RULES}
