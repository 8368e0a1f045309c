"""The sample viewer in a real headless Chromium (skipped when the `chromium` package is absent).

Set ROLEBOUND_SCREENSHOTS=DIR to keep the screenshots (docs/figures/viewer.png comes from the
bundled-model test)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rolebound import api
from rolebound.report.builder import question_text
from rolebound.store import RunDir, load_records

from cdp import Browser, need_chromium
from helpers import write_mcq


@pytest.fixture(scope="module")
def browser():
    need_chromium()
    b = Browser()
    yield b
    b.close()


def _open_report(b: Browser, run_dir: Path) -> str:
    b.open((Path(run_dir) / "report.html").resolve().as_uri(), ready="window.roleboundViewers")
    sid = b.js("Object.keys(window.roleboundViewers)[0]")
    assert sid
    return sid


def _search(b: Browser, sid: str, text: str) -> None:
    b.js(f"(function () {{ var q = document.getElementById({json.dumps(sid + '-search')});"
         f" q.value = {json.dumps(text)}; q.dispatchEvent(new Event('input')); }})()")


def _open_row_with(b: Browser, sid: str, text: str) -> None:
    """Find the row showing `text` in the list (as the user sees it) and click it."""
    _search(b, sid, text)
    find = (f"Array.from(document.querySelectorAll('#{sid}-body .vrow'))"
            f".find(function (r) {{ return Array.from(r.children).some(function (c) {{"
            f" return c.textContent === {json.dumps(text)}; }}); }})")
    b.wait(find)
    b.js(find + ".click()")
    b.wait(f"!document.getElementById('{sid}-detail').hidden")


def _pane(b: Browser, sid: str) -> dict:
    return b.js(f"(function () {{ var p = document.getElementById('{sid}-detail'); return {{"
                f" title: p.querySelector('.dtitle').textContent,"
                f" pres: Array.from(p.querySelectorAll('pre')).map(function (e) {{ return e.textContent; }}),"
                f" cells: Array.from(p.querySelectorAll('td')).map(function (e) {{ return e.textContent; }}),"
                f" summaries: Array.from(p.querySelectorAll('summary')).map(function (e) {{ return e.textContent; }}),"
                f" heads: Array.from(p.querySelectorAll('h3')).map(function (e) {{ return e.textContent; }}) }}; }})()")


def _check_bc(b: Browser, run_dir: Path, shot: str | None = None) -> None:
    recs = load_records(run_dir)
    bc = next(r for r in recs if r.stage == "bc" and r.role == "model" and r.error is None)
    q = question_text(bc)
    assert q and not q.startswith("Answer")                     # the user's question, not the prefilled turn
    sid = _open_report(b, run_dir)
    _open_row_with(b, sid, q)
    pane = _pane(b, sid)
    assert pane["title"] == bc.call_id
    user = [m["content"] for m in bc.prompt if m["role"] == "user"][-1]
    assert user in pane["pres"]                                   # the full prompt, every character
    assert bc.response in pane["pres"]                            # the raw reply
    assert "Options scored (log-probabilities)" in pane["heads"]
    assert f"{bc.logprobs[0]:.3f}" in pane["cells"]
    if shot and os.environ.get("ROLEBOUND_SCREENSHOTS"):
        out = Path(os.environ["ROLEBOUND_SCREENSHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        _search(b, sid, "")                                          # the whole list beside the open pane
        b.js(f"document.getElementById('{sid}').scrollIntoView()")
        b.screenshot(out / shot)


@pytest.mark.slow
def test_charm_bc_row_opens_its_exchange(browser, tmp_path):
    res = api.run("charm", model="fake:random", limit=3, out=tmp_path / "run", progress=False)
    _check_bc(browser, res.run_dir)
    sid = browser.js("Object.keys(window.roleboundViewers)[0]")
    _search(browser, sid, "")                                     # the open row stays open and selected
    first = _pane(browser, sid)["title"]
    assert browser.js(f"document.querySelector('#{sid}-body .vrow.sel').getAttribute('data-row')") is not None
    browser.js(f"document.getElementById('{sid}-detail').dispatchEvent(new KeyboardEvent('keydown', {{key: 'j'}}))")
    browser.wait(f"document.querySelector('#{sid}-detail .dtitle').textContent !== {json.dumps(first)}")
    browser.js(f"document.getElementById('{sid}-detail').dispatchEvent(new KeyboardEvent('keydown', {{key: 'Escape'}}))")
    browser.wait(f"document.getElementById('{sid}-detail').hidden")


@pytest.mark.model
def test_bundled_charm_report_in_chromium(browser, tmp_path):
    res = api.run("charm", model="bundled", limit=2, out=tmp_path / "run", progress=False)
    _check_bc(browser, res.run_dir, shot="viewer.png")


@pytest.mark.slow
def test_judged_answer_shows_the_judges_verdict(browser, tmp_path):
    res = api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=2, out=tmp_path / "run",
                  progress=False)
    recs = load_records(res.run_dir)
    ans = next(r for r in recs if r.stage == "answer" and r.role == "model")
    judge = next(r for r in recs if r.role == "judge" and r.item_id == ans.item_id)
    sid = _open_report(browser, res.run_dir)
    _open_row_with(browser, sid, ans.meta["query"])
    pane = _pane(browser, sid)
    assert [m["content"] for m in ans.prompt][-1] in pane["pres"] and ans.response in pane["pres"]
    assert f"judge {judge.stage}" in pane["cells"] and judge.parsed in pane["cells"]   # verdict next to the answer
    assert any(s.startswith("judge") and f"verdict: {judge.parsed}" in s for s in pane["summaries"])
    assert judge.prompt[0]["content"] in pane["pres"]             # and what the judge was asked


@pytest.mark.slow
def test_twenty_thousand_records_scroll_to_the_last_row(browser, tmp_path):
    n = 20_000
    data = write_mcq(tmp_path / "q.jsonl", 2)
    run = tmp_path / "run"
    api.run("mcq", model="fake:random", data=str(data), out=run, progress=False)
    template = json.loads((run / "records.jsonl").read_text().splitlines()[0])
    with (run / "records.jsonl").open("w") as fh:
        for i in range(n):
            r = dict(template, call_id=f"q{i:05d}/direct/answer", item_id=f"q{i:05d}", response=f"reply {i}",
                     prompt=[{"role": "user", "content": f"Question number {i}?\nA. yes\nB. no"}])
            fh.write(json.dumps(r) + "\n")
    rd = RunDir(run)
    m = rd.read_manifest()
    m.n_items = n
    rd.write_manifest(m)
    api.build_report(run)
    sid = _open_report(browser, run)
    assert browser.js(f"document.getElementById('{sid}-count').textContent").startswith(f"{n} of {n} rows")
    assert browser.js(f"document.querySelectorAll('#{sid}-body .vrow').length") < 200     # virtualised
    browser.js(f"(function () {{ var l = document.getElementById('{sid}-list'); l.scrollTop = l.scrollHeight; }})()")
    last = f"document.querySelector('#{sid}-body .vrow[data-row=\"{n - 1}\"]')"
    browser.wait(last)
    inside = browser.js(f"(function () {{ var l = document.getElementById('{sid}-list').getBoundingClientRect();"
                        f" var r = {last}.getBoundingClientRect(); return r.top >= l.top && r.bottom <= l.bottom + 1; }})()")
    assert inside
    browser.js(last + ".click()")
    browser.wait(f"!document.getElementById('{sid}-detail').hidden")
    pane = _pane(browser, sid)
    assert pane["title"] == f"q{n - 1:05d}/direct/answer" and f"reply {n - 1}" in pane["pres"]
    if os.environ.get("ROLEBOUND_SCREENSHOTS"):
        browser.screenshot(Path(os.environ["ROLEBOUND_SCREENSHOTS"]) / "viewer-20000.png")


def test_chromium_helper_skips_cleanly(monkeypatch):
    """Without chromium the browser tests skip with one line, not an error."""
    import cdp

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        cdp.need_chromium()
