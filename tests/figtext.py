"""What a reader can read on a matplotlib figure: every text drawn, its size and its window extent
(get_window_extent with the figure's own Agg renderer), and the legends' boxes.

problems(fig) lists texts smaller than MIN_PT, texts drawn on top of each other, and legends that sit
on their axes' plot area (where bars, error bars and lines run into them)."""

from __future__ import annotations

MIN_PT = 8.0


def drawn_texts(fig):
    """(text, size in points, window extent) of every text the figure draws, once each."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    seen: dict[int, tuple] = {}
    draw_text = renderer.draw_text

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s.strip() and id(mtext) not in seen:
            seen[id(mtext)] = (mtext, prop.get_size_in_points())
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = record
    fig.draw(renderer)
    renderer.draw_text = draw_text
    return [(t.get_text(), size, t.get_window_extent(renderer)) for t, size in seen.values()], renderer


def _overlap(a, b, tol: float = 1.0) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > tol and h > tol


def problems(fig, min_pt: float = MIN_PT) -> list[str]:
    texts, renderer = drawn_texts(fig)
    out = [f"{s!r} is {size:.1f} pt (< {min_pt})" for s, size, _ in texts if size < min_pt - 1e-6]
    for i, (s, _, a) in enumerate(texts):
        for t, _, b in texts[i + 1:]:
            if _overlap(a, b):
                out.append(f"{s!r} overlaps {t!r}")
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None and ax.has_data() and _overlap(leg.get_window_extent(renderer),
                                                         ax.patch.get_window_extent(renderer)):
            out.append(f"the legend ({', '.join(t.get_text() for t in leg.get_texts())}) sits on the plot "
                       f"of {ax.get_title()!r}")
    return out
