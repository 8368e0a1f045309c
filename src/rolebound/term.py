"""Text from servers, data, records and manifests, made safe for a terminal line or a log.

`visible` shows control characters as escapes (ESC as \\x1b), so a reply or a manifest cannot clear
the screen, set the window title or rewrite a line; `clip` and `shorten` cut echoed values; `console` is a rich
Console whose printed text goes through `visible` (its own styles still reach the terminal)."""

from __future__ import annotations

import re
from typing import Any

# C0 (but \t and \n), DEL, C1, and the bidi overrides/isolates that reorder what a line shows
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_NL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
CLIP = 200


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: Any, *, newlines: bool = True) -> str:
    """`text` with every control character written as an escape; newlines=False escapes \\n too
    (for what must stay one line)."""
    return (_CONTROL if newlines else _CONTROL_NL).sub(_escape, str(text))


def clip(value: Any, n: int = CLIP) -> str:
    """An echoed value cut to about n characters, saying how long it was."""
    s = str(value)
    return s if len(s) <= n else f"{s[:n]}... ({len(s)} characters)"


# a quoted value (the quote not inside a word: "suite's" is no quote), else one long word
_ECHOED = re.compile(r"""(?<!\w)(['"])([^'"\n]{%d,})\1(?!\w)|\S{%d,}""" % (CLIP + 1, CLIP + 1))
MAX_LINE = 10 * CLIP


def shorten(line: str) -> str:
    """An error line with each echoed value (quoted, or one long word) cut to about CLIP
    characters, and the whole to MAX_LINE: a 120 KB --set value is not printed back whole."""
    line = _ECHOED.sub(lambda m: m.group(1) + clip(m.group(2)) + m.group(1) if m.group(1) else clip(m.group()),
                       line)
    return clip(line, MAX_LINE)


def console(**kw):
    """A rich Console that escapes control characters in what it prints (not in its own styles)."""
    from rich.console import Console, RenderHook
    from rich.segment import Segment

    class _Visible:
        def __init__(self, inner):
            self.inner = inner

        def __rich_console__(self, con, options):
            for seg in con.render(self.inner, options):
                yield seg if seg.control else Segment(visible(seg.text), seg.style, None)

    class _Hook(RenderHook):
        def process_renderables(self, renderables):
            return [_Visible(r) for r in renderables]

    con = Console(**kw)
    con.push_render_hook(_Hook())
    return con
