"""Final-answer extraction from `\\boxed{...}` (RoleCapBench, Appendix D).

- Only the LAST literal `\\boxed{` counts; it is read through its matching closing brace, with
  nested braces balanced and backslash-escaped characters (`\\{`, `\\}`) skipped.
- A missing or unclosed last box gives no answer, even when an earlier box was well formed.
- The content is stripped and uppercased; only exactly A, B, C or D is a valid answer. No
  punctuation is removed and no option text is matched: `(A)`, `A.`, `Option A`, `AB`, `IDK`
  are all invalid.

Every invalid answer is counted by kind: missing, unclosed, idk, other.
"""

from __future__ import annotations

import re

from ...records import ABCD, INVALID

BOX = "\\boxed{"
_ONE_LETTER = frozenset(ABCD)       # a set: "AB" is not a letter (as it would be "in" the string)
KINDS = ("valid", "missing", "unclosed", "idk", "other")


def _scan(text: str) -> tuple[int, int | None]:
    """Start of the last `\\boxed{` (-1 if none) and the index of its closing brace (None if unclosed)."""
    start = text.rfind(BOX)
    if start < 0:
        return -1, None
    i = start + len(BOX)
    depth = 1
    while i < len(text):
        c = text[i]
        if c == "\\":         # escaped character: never a brace that counts
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return start, i
        i += 1
    return start, None


def last_boxed(text: str | None) -> tuple[str | None, str]:
    """(stripped content of the last box, "ok") or (None, "missing" | "unclosed")."""
    if not text:
        return None, "missing"
    start, close = _scan(text)
    if start < 0:
        return None, "missing"
    if close is None:
        return None, "unclosed"
    return text[start + len(BOX): close].strip(), "ok"


def parse_boxed_letter(text: str | None) -> str:
    """The option letter A-D of the last box, or INVALID."""
    content, status = last_boxed(text)
    if status != "ok":
        return INVALID
    ans = content.strip().upper()
    return ans if ans in _ONE_LETTER else INVALID


def normalize_gold(gold: str) -> str:
    return str(gold).strip().upper()


# Only for counting: a box that abstains ("idk", "\text{I don't know}") is still invalid.
_IDK = {"IDK", "I DON'T KNOW", "I DONT KNOW", "I DO NOT KNOW", "DON'T KNOW", "UNKNOWN"}
_TEXT_WRAP = re.compile(r"^\\(?:text|mathrm|textbf|mathbf)\s*\{(.*)\}$", re.DOTALL)


def outcome(text: str | None) -> str:
    """How the answer came out: valid, missing, unclosed, idk or other."""
    content, status = last_boxed(text)
    if status != "ok":
        return status
    if content.upper() in _ONE_LETTER:
        return "valid"
    inner = content
    m = _TEXT_WRAP.match(inner)
    if m:
        inner = m.group(1)
    inner = inner.strip().strip("'\"`.").replace("\u2019", "'").upper()
    return "idk" if inner in _IDK else "other"


def strip_trailing_box(text: str | None) -> str:
    """The response without a trailing boxed final answer (what the judge reads, Appendix E)."""
    if not text:
        return ""
    start, close = _scan(text)
    if start < 0 or close is None:
        return text
    # only a trailing box goes: after it may come closing math or markdown, nothing more
    if text[close + 1:].strip(" \t\r\n$*.)]}\\") != "":
        return text
    head = text[:start].rstrip()
    for opener in ("$$", "$", "\\[", "\\(", "**"):
        if head.endswith(opener):
            head = head[: -len(opener)].rstrip()
            break
    return head
