"""What a person sees, in a real headless Chromium (skipped when the `chromium` package is absent):
every suite's report, the card, `view`'s index and `compare`. In the sample viewer's default view
no header cell is cut short (its text fits its cell: scrollWidth <= clientWidth), the view keeps
to the few columns that identify a sample and its outcome, the column picker brings the rest; no
page runs wider than the window, and no figure is shown smaller than it was drawn (which would
shrink its labels below the 8 pt tests/test_figure_text.py checks).

Set ROLEBOUND_SCREENSHOTS=DIR to keep a screenshot of each page."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rolebound import api, view
from rolebound.card.build import make_card
from rolebound.compare import compare_runs

from cdp import Browser, need_chromium

pytestmark = pytest.mark.slow

RUNS = {  # suite, options: a run of each kind the viewer shows (log-prob and generated answers, judged)
    "charm-logprob": ("charm", {"scoring": "logprob"}),
    "charm": ("charm", {}),
    "knowledge-errors": ("knowledge-errors", {}),
    "multiverse": ("multiverse", {}),
    "capability": ("capability", {}),
}

TINY = {"charm": 40, "knowledge-errors": 8, "multiverse": 16, "capability": 4}

# every header cell of every viewer: [text, its width, the width its text needs]
CUT = """Array.from(document.querySelectorAll('.vhead > div')).filter(function (d) {
  return d.scrollWidth > d.clientWidth; }).map(function (d) { return [d.textContent, d.clientWidth, d.scrollWidth]; })"""
WIDE = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
# figures shown smaller than drawn shrink their 8 pt labels (tests/test_figure_text.py checks the PNG)
SHRUNK = """Array.from(document.images).filter(function (i) { return i.clientWidth < 0.95 * i.naturalWidth; })
  .map(function (i) { return [i.alt, i.clientWidth, i.naturalWidth]; })"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    out = {}
    for name, (suite, kw) in RUNS.items():
        out[name] = api.run(suite, model="fake:random", limit=12, out=root / "runs" / name, progress=False,
                            **kw).run_dir
    return root, out


@pytest.fixture(scope="module")
def browser():
    need_chromium()
    b = Browser(width=1400, height=900)
    yield b
    b.close()


def _shot(b: Browser, name: str) -> None:
    if os.environ.get("ROLEBOUND_SCREENSHOTS"):
        out = Path(os.environ["ROLEBOUND_SCREENSHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        b.screenshot(out / f"{name}.png")


def _open(b: Browser, page: Path, ready: str = "document.readyState === 'complete'") -> None:
    b.open(Path(page).resolve().as_uri(), ready=ready)
    b.wait("Array.from(document.images).every(function (i) { return i.complete; })")


@pytest.mark.parametrize("name", list(RUNS))
def test_the_viewers_default_view_cuts_no_header(browser, runs, name):
    _, dirs = runs
    _open(browser, dirs[name] / "report.html", ready="window.roleboundViewers")
    sid = browser.js("Object.keys(window.roleboundViewers)[0]")
    data = json.loads(browser.js(f"document.getElementById('{sid}-data').textContent"))
    heads = browser.js(f"Array.from(document.querySelectorAll('#{sid}-head > div')).map(function (d) {{"
                       f" return d.textContent; }})")
    assert heads == data["shown"] and 3 <= len(heads) <= 8           # the few columns that identify a sample
    assert len(data["columns"]) > len(heads)                          # the rest behind the picker
    for c in data["columns"]:                                         # none empty in every row ("read by")
        assert any(r.get(c) not in (None, "") for r in data["rows"]), c
    browser.js(f"document.getElementById('{sid}').scrollIntoView()")
    assert browser.js(CUT) == [] and browser.js(WIDE) <= 0 and browser.js(SHRUNK) == []
    _shot(browser, f"viewer-{name}")
    if "outcome" in data["columns"]:                                  # one vocabulary for outcomes
        assert {r.get("outcome") for r in data["rows"]} <= {"correct", "wrong", "invalid", "error", None, ""}
    browser.js(f"document.querySelectorAll('#{sid}-filters .colpick input').forEach(function (cb) {{"
               f" if (!cb.checked) cb.click(); }})")                  # every column, through the picker
    assert browser.js(f"document.querySelectorAll('#{sid}-head > div').length") == len(data["columns"])
    assert browser.js(f"document.querySelector('#{sid}-body .vrow').children.length") == len(data["columns"])
    assert browser.js(CUT) == []                                      # the list scrolls sideways instead


def test_a_log_prob_run_shows_no_empty_column_and_no_wide_one_digit_reply(browser, runs):
    _, dirs = runs
    _open(browser, dirs["charm-logprob"] / "report.html", ready="window.roleboundViewers")
    sid = browser.js("Object.keys(window.roleboundViewers)[0]")
    data = json.loads(browser.js(f"document.getElementById('{sid}-data').textContent"))
    assert "read by" not in data["columns"]                           # no rule reads a scored option
    browser.js(f"document.querySelector('#{sid}-filters .colpick input[data-col=\"response\"]').click()")
    i = browser.js(f"Array.from(document.querySelectorAll('#{sid}-head > div')).map(function (d) {{"
                   f" return d.textContent; }}).indexOf('response')")
    width = browser.js(f"document.querySelectorAll('#{sid}-head > div')[{i}].clientWidth")
    question = browser.js(f"document.querySelectorAll('#{sid}-head > div')[0].clientWidth")
    assert width < question / 2                                       # a digit's column, not a long text's


def test_the_card_compare_and_view_pages_fit_the_window(browser, runs, tmp_path):
    root, dirs = runs
    res = make_card("fake:random", out=tmp_path / "card", limits=TINY, progress=False, say=lambda *a: None)
    pages = {"card": res.out / "card.html"}

    compare_runs([dirs["charm"], dirs["charm-logprob"]], tmp_path / "compare")
    pages["compare"] = tmp_path / "compare" / "compare.html"
    index = tmp_path / "index.html"
    index.write_text(view.index_html(root / "runs"), encoding="utf-8")
    pages["view"] = index
    for name, page in pages.items():
        _open(browser, page)
        assert browser.js(WIDE) <= 0, name
        assert browser.js(SHRUNK) == [], name
        _shot(browser, name)
    _open(browser, pages["card"])
    text = browser.js("document.body.innerText")
    assert "bundled demo model" not in text and "a test stand-in model (fake:random" in text   # says what it is
    ke = "document.querySelectorAll('#knowledge-errors ~ .pair')[0]"
    cells = browser.js(f"Array.from({ke}.querySelectorAll('td.note')).filter(function (td) {{"
                       f" return td.querySelector('details'); }}).map(function (td) {{ return td.innerText; }})")
    assert cells and all(c.startswith("paper: 14 models, ") and "highest" in c for c in cells)   # the list folded
