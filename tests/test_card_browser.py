"""The card page in a real headless Chromium (skipped when the `chromium` package is absent): the
charts load offline, nothing from run data runs as markup, and each suite links its report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rolebound.card.build import make_card
from rolebound.store import RunDir

from cdp import Browser, need_chromium

pytestmark = pytest.mark.slow     # processes, servers or whole pipelines: not in `make test-fast`

TINY = {"charm": 40, "knowledge-errors": 8, "multiverse": 16, "capability": 4}
BAD = 'x<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_card_page_in_chromium(tmp_path):
    need_chromium()
    first = make_card("fake:random", out=tmp_path / "first", limits=TINY, progress=False, say=lambda *a: None)
    runs = []
    for s in first.card["suites"]:            # the same runs, renamed to a model whose name is markup
        dst = tmp_path / "runs" / s["suite"]
        shutil.copytree(s["run_dir"], dst)
        m = RunDir(dst).read_manifest()
        m.model, m.judge = f"openai:{BAD}", (f"openai:{BAD}" if m.judge else None)
        RunDir(dst).write_manifest(m)
        runs.append(dst)
    res = make_card(f"openai:{BAD}", out=tmp_path / "card", runs=runs, progress=False, say=lambda *a: None)
    b = Browser(width=1200, height=900)
    try:
        b.open((res.out / "card.html").resolve().as_uri())
        assert b.js("window.__pwned === undefined")
        assert b.js("document.querySelector('h1').textContent") == f"Model card: openai:{BAD}"
        assert b.js("document.querySelectorAll('h2').length") == 4
        b.wait("Array.from(document.images).every(function (i) { return i.complete; })")
        assert b.js("Array.from(document.images).map(function (i) { return i.className + ':' + (i.naturalWidth > 0); })") \
            == ["chart:true"] * 4
        hrefs = b.js("Array.from(document.querySelectorAll('a')).map(function (a) { return a.href; })")
        assert len(hrefs) == 4 and all(Path(h.removeprefix("file://")).exists() for h in hrefs)
        assert "Demo only." not in b.js("document.body.textContent")
    finally:
        b.close()
    assert json.loads((res.out / "card.json").read_text())["model"] == f"openai:{BAD}"
