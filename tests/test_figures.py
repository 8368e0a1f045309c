"""Reports draw their figures without pyplot (rolebound/report/builder.py), so a CLI run that
writes a report never pays for pyplot's start-up, and the figures still reach the page."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rolebound.report.builder import subplots


def test_subplots_gives_pyplots_shapes_and_renders_a_png():
    import io

    fig, axes = subplots(2, 3, figsize=(4, 3), squeeze=False)
    assert axes.shape == (2, 3) and tuple(fig.get_size_inches()) == (4, 3)
    fig, ax = subplots(figsize=(3, 2), layout="constrained")
    ax.bar(["a", "b"], [1, 2])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["charm", "capability"])
def test_a_report_with_figures_never_imports_pyplot(suite, tmp_path):
    opts = {"similarity": False} if suite == "charm" else {}       # no embedder: figures are the point
    code = (f"import sys; from rolebound import api; api.run({suite!r}, model='fake:random', limit=4, "
            f"out={str(tmp_path / 'run')!r}, progress=False, options={opts!r}); "
            f"print('matplotlib.pyplot' in sys.modules, "
            f"'matplotlib.figure' in sys.modules)")
    env = {**os.environ, "ROLEBOUND_DERIVED_DIR": str(tmp_path / "derived")}     # no figure drawn before
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split()[-2:] == ["False", "True"]          # drew, without pyplot
    assert "data:image/png;base64," in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
