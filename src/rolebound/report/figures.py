"""Figures without pyplot, and their PNGs kept in the derived cache.

A `Figure` renders itself through the Agg canvas on savefig, so the reports never import pyplot
(its backend machinery and global figure registry cost every CLI run that writes a report about
0.2 s of start-up) and never need to close what they drew.

A report or card asks for a figure as a `Drawing`: the function that draws it and its inputs. Its
PNG is kept in the derived cache under the function's name, the source of the folder that defines
it (and of this module), its inputs, the matplotlib version and the dpi, so a report rebuilt from
the same figures (`rolebound report`, a card or sweep writing its reports again) copies the bytes it
drew before and never imports matplotlib (0.7 s of start-up, and a few tenths of a second a figure).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple


class Drawing(NamedTuple):
    """A figure not drawn yet: fn(*args) returns a matplotlib Figure (or PNG bytes). The args are
    JSON-able values or numpy arrays."""
    fn: Callable[..., Any]
    args: tuple


def drawing(fn: Callable[..., Any], *args: Any) -> Drawing:
    return Drawing(fn, args)


def png(fig: Any, dpi: int = 110) -> bytes:
    """The PNG of a Figure, or of a Drawing (from the derived cache when drawn before)."""
    if not isinstance(fig, Drawing):
        return _save(fig, dpi)
    from importlib.metadata import version

    from ..cache import cached_bytes

    draw = lambda: _save(fig.fn(*fig.args), dpi)     # noqa: E731
    code = _code(fig.fn.__module__)
    if code is None:                                  # defined where no file says what it draws
        return draw()
    parts = {"fn": f"{fig.fn.__module__}.{fig.fn.__qualname__}", "code": code, "args": _digest(fig.args),
             "matplotlib": version("matplotlib"), "dpi": dpi}
    return cached_bytes("figures", parts, draw, ".png")


def _save(fig: Any, dpi: int) -> bytes:
    if isinstance(fig, bytes):
        return fig
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


@functools.lru_cache(maxsize=None)
def _code(module: str) -> str | None:
    """A hash of every Python file beside the module (its helpers usually live there) and of this
    one: an edit to the drawing code draws the figure again. None for a module without a file."""
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        return None
    files = sorted(Path(path).parent.glob("*.py")) + [Path(__file__)]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _digest(args: tuple) -> str:
    def plain(x: Any) -> Any:
        import numpy as np

        if isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            return {"ndarray": hashlib.sha256(a.tobytes()).hexdigest(), "shape": a.shape, "dtype": str(a.dtype)}
        if isinstance(x, np.generic):
            return x.item()
        raise TypeError(f"a figure input of type {type(x).__name__} cannot be keyed")

    blob = json.dumps(args, sort_keys=True, ensure_ascii=False, default=plain)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None,
             layout: str | None = None, **kw: Any):
    """(figure, axes) as `pyplot.subplots` gives them, for a figure nobody shows on screen."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kw)
