"""Figures without pyplot. A `Figure` renders itself through the Agg canvas on savefig, so the
reports never import pyplot (its backend machinery and global figure registry cost every CLI run
that writes a report about 0.2 s of start-up) and never need to close what they drew."""

from __future__ import annotations

from typing import Any


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None,
             layout: str | None = None, **kw: Any):
    """(figure, axes) as `pyplot.subplots` gives them, for a figure nobody shows on screen."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kw)
