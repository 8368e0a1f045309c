"""`rolebound card`: figures read from each run's metrics.json, missing figures as "-" with the
reason, escaping, --runs reuse, resume without calls, --compare, and the CLI's one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.card.build import card_suites, make_card
from rolebound.card.compare import compare_cards
from rolebound.report.fmt import fmt_figure
from rolebound.card.render import read_card, write_card
from rolebound.store import RunDir
from rolebound.suites import get_suite

from helpers import raw_tags, write_mcq

TINY = {"charm": 40, "knowledge-errors": 8, "multiverse": 16, "capability": 4}
SCRIPT = Path(sys.executable).with_name("rolebound")
BAD = 'x<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def quiet(*_a, **_k):
    pass


@pytest.fixture(scope="module")
def fake_card(tmp_path_factory):
    out = tmp_path_factory.mktemp("card") / "card"
    return make_card("fake:random", out=out, limits=TINY, progress=False, say=quiet)


def sec(card: dict, suite: str) -> dict:
    return next(s for s in card["suites"] if s["suite"] == suite)


def fig(section: dict, key: str) -> dict:
    return next(f for f in section["figures"] if f["key"] == key)


def metrics_of(section: dict) -> dict:
    return json.loads((Path(section["run_dir"]) / "metrics.json").read_text())


@pytest.mark.slow
def test_every_suite_runs_its_subset_in_the_card_folder(fake_card):
    card = read_card(fake_card.out)
    assert [s["suite"] for s in card["suites"]] == card_suites()
    for s in card["suites"]:
        assert Path(s["run_dir"]) == fake_card.out / "runs" / s["suite"]
        assert s["limit"] == TINY[s["suite"]] and s["finished"] and not s["problems"]
        assert s["figures"] and s["finding"] and s["chart"]
        assert (fake_card.out / s["report"]).resolve() == (Path(s["run_dir"]) / "report.html").resolve()
    assert card["demo"] is True


def test_default_limits_are_the_suites_card_limits():
    assert {n: get_suite(n).card_limit for n in card_suites()} == {"charm": 600, "knowledge-errors": 24,
                                                            "multiverse": 96, "capability": 8}


@pytest.mark.slow
def test_figures_are_the_metrics_json_values(fake_card):
    card = fake_card.card
    m = metrics_of(sec(card, "charm"))
    gap = fig(sec(card, "charm"), "c_gap")
    assert (gap["value"], gap["lo"], gap["hi"]) == tuple(m["matrix"]["all"]["compliance_gap"][k] for k in ("rate", "lo", "hi"))
    assert fig(sec(card, "charm"), "r_fail")["value"] == m["matrix"]["all"]["recognition_failure"]["rate"]
    assert fig(sec(card, "charm"), "ba")["value"] == m["stage_accuracy"]["ba/all"]["rate"]
    assert fig(sec(card, "charm"), "bc")["n"] == m["stage_accuracy"]["bc/all"]["n"]
    m = metrics_of(sec(card, "knowledge-errors"))
    for et in ("KKE", "UKE"):
        for cat in ("event", "relational", "attitudinal", "identity", "all"):
            assert fig(sec(card, "knowledge-errors"), f"{et}/{cat}")["value"] == m["accuracy"]["vanilla"][et][cat]["mean"]
    m = metrics_of(sec(card, "multiverse"))
    assert fig(sec(card, "multiverse"), "direct/canon")["value"] == m["strategies"]["direct"]["canon"]["acc"]["rate"]
    drop = fig(sec(card, "multiverse"), "cross-direct/canon/drop")
    assert (drop["value"], drop["lo"], drop["hi"]) == tuple(m["cross"]["cross-direct"]["canon"]["drop"][k]
                                                           for k in ("diff", "lo", "hi"))
    m = metrics_of(sec(card, "capability"))
    assert fig(sec(card, "capability"), "identity/A")["value"] == m["by_strategy"]["identity"]["macro"]["A"]["mean"]
    assert fig(sec(card, "capability"), "injection/effect/A")["value"] == m["deltas"]["injection"]["A"]


@pytest.mark.slow
def test_page_shows_figures_findings_charts_and_the_demo_warning(fake_card):
    html = (fake_card.out / "card.html").read_text()
    md = (fake_card.out / "card.md").read_text()
    card = fake_card.card
    assert "Demo only." in html and "prove that the pipeline runs" in html and "Demo only." in md
    assert html.count('<img class="chart"') == 4 and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html and "<script" not in html      # offline, inert
    for s in card["suites"]:
        assert s["finding"].replace("'", "&#39;") in html
        assert f'href="runs/{s["suite"]}/report.html"' in html
        assert f"(runs/{s['suite']}/report.html)" in md
        assert (fake_card.out / "figures" / f"{s['suite']}.png").stat().st_size > 1000
        for f in s["figures"]:
            assert fmt_figure(f, kind=False) in html if f["value"] is not None else True
    gap = fig(sec(card, "charm"), "c_gap")
    assert f"Compliance Gap of {gap['value']:.1f}%" in sec(card, "charm")["finding"]


@pytest.mark.slow
def test_rerun_makes_no_model_calls(fake_card):
    before = {s["suite"]: RunDir(s["run_dir"]).read_manifest().counts for s in fake_card.card["suites"]}
    again = make_card("fake:random", out=fake_card.out, limits=TINY, progress=False, say=quiet)
    for s in again.card["suites"]:
        c = RunDir(s["run_dir"]).read_manifest().counts
        assert c["model_calls"] == before[s["suite"]]["model_calls"]
        assert c["invocations"] == before[s["suite"]]["invocations"] + 1
        assert [f["value"] for f in s["figures"]] == [f["value"] for f in sec(fake_card.card, s["suite"])["figures"]]


def test_missing_figures_are_a_dash_with_the_reason_never_zero(tmp_path):
    figs = get_suite("charm").card_figures({})
    assert all(f["value"] is None and f["why"] for f in figs["figures"])
    m = {"stage_accuracy": {"ba/all": {"rate": 50.0, "lo": 40.0, "hi": 60.0, "n": 10}},
         "matrix": {"all": {"n": 0}},
         "override": {"rate": None, "lo": None, "hi": None, "n": 0, "ba_pos_fc_bc": 0}}
    cf = get_suite("charm").card_figures(m)
    ov = next(f for f in cf["figures"] if f["key"] == "override")
    assert ov["value"] is None and "nothing to verify" in ov["why"]
    assert fmt_figure(ov) == f"- ({ov['why']})"
    cap = get_suite("capability").card_figures({"by_strategy": {"identity": {
        "macro": {"TA": {"mean": 0.5, "std": 0.1, "n_roles": 2}, "IA": {"mean": None, "std": None, "n_roles": 0},
                  "A": {"mean": 0.5, "std": 0.0, "n_roles": 1}}, "outcomes": {"valid": 2, "total": 4}}}})
    ia = next(f for f in cap["figures"] if f["key"] == "identity/IA")
    assert ia["value"] is None and "ceiling" in ia["why"]
    section = {"suite": "charm", "title": "CHARM", "run_dir": "r", "reused": False, "report": None, "model": "fake:random",
               "judge": None, "self_judged": False, "protocol": "demo", "protocol_label": "", "strategies": ["independent"],
               "scoring": None, "limit": None, "n_items": 0, "repeats": 1, "started": "", "finished": "",
               "model_calls": 0, "figures": cf["figures"], "finding": cf["finding"], "chart": cf["chart"], "problems": []}
    card = {"card": 1, "model": "fake:random", "judge": None, "demo": True, "created": "now", "rolebound": "0",
            "git": None, "suites": [section]}
    write_card(card, tmp_path)
    html = (tmp_path / "card.html").read_text()
    assert not re.search(r"(?<![\d.])0\.0%", html) and "nothing to verify" in html and "No Compliance Gap" in html
    row = re.search(r"<tr class=\"missing\"><td>verified parametric override[^<]*</td><td class=\"v\">([^<]*)</td>", html)
    assert row and row.group(1) == "-"


@pytest.mark.slow
def test_a_metrics_json_without_the_figures_is_a_problem_not_zeros(fake_card, tmp_path):
    run = tmp_path / "capability"
    shutil.copytree(sec(fake_card.card, "capability")["run_dir"], run)
    (run / "metrics.json").write_text(json.dumps({"by_strategy": {"identity": {"macro": "oops"}}}))
    res = make_card("fake:random", out=tmp_path / "card", runs=[run], limits={**TINY}, progress=False, say=quiet)
    s = sec(res.card, "capability")
    assert s["reused"] and s["figures"] == [] and "does not hold this suite's figures" in s["problems"][0]


@pytest.mark.slow
def test_runs_are_reused_and_not_run_again(fake_card, tmp_path):
    charm = api.run("charm", model="fake:random", limit=20, out=tmp_path / "mine", progress=False).run_dir
    calls = RunDir(charm).read_manifest().counts["model_calls"]
    out = tmp_path / "card"
    res = make_card("fake:random", out=out, runs=[charm], limits=TINY, progress=False, say=quiet)
    s = sec(res.card, "charm")
    assert s["reused"] and Path(s["run_dir"]) == charm and not (out / "runs" / "charm").exists()
    assert RunDir(charm).read_manifest().counts["model_calls"] == calls and "charm" not in res.ran
    assert s["report"] == "../mine/report.html" and (out / s["report"]).exists()
    assert sorted(res.ran) == sorted(n for n in card_suites() if n != "charm")


def _reused_card(fake_card, tmp_path, model: str) -> list[Path]:
    runs = []
    for s in fake_card.card["suites"]:
        dst = tmp_path / "runs" / s["suite"]
        shutil.copytree(s["run_dir"], dst)
        rd = RunDir(dst)
        m = rd.read_manifest()
        m.model = model
        m.judge = model if m.judge else None
        m.protocol = {**m.protocol, "mode": "paper", "label": "the paper's protocol (test)",
                      "self_judged": bool(m.judge)}
        rd.write_manifest(m)
        runs.append(dst)
    return runs


@pytest.mark.slow
def test_model_and_judge_names_are_escaped(fake_card, tmp_path):
    model = f"openai:{BAD}"
    runs = _reused_card(fake_card, tmp_path, model)
    res = make_card(model, judge=f"openai:{BAD}", out=tmp_path / "card", runs=runs, progress=False, say=quiet)
    assert res.ran == []                                   # every suite reused: no backend was made
    html = (res.out / "card.html").read_text()
    md = (res.out / "card.md").read_text()
    assert "<img src=x" not in html and "<script>" not in html and raw_tags(md) == []
    assert "&lt;img src=x onerror=" in html and "&lt;script&gt;" in html
    assert "\\<img src=x onerror=" in md
    assert "Demo only." not in html                        # openai: not the demo model
    assert "paper settings; self-judged: knowledge-errors, multiverse" in html
    assert "(self-judged: the model judged its own answers)" in html
    assert json.loads((res.out / "card.json").read_text())["model"] == model


@pytest.mark.slow
def test_compare_puts_models_side_by_side(fake_card, tmp_path):
    other = make_card("fake:constant", out=tmp_path / "constant", limits=TINY, progress=False, say=quiet)
    paths = compare_cards([fake_card.out, other.out / "card.json"], tmp_path / "cmp")
    html = (tmp_path / "cmp" / "compare.html").read_text()
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert html.count("<table class=\"compare\">") == 4 and md.count("\n## ") == 4
    assert "<th>fake:random</th>" in html and "<th>fake:constant</th>" in html
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    charm = next(t for t in data["tables"] if t["suite"] == "charm")
    gap = next(r for r in charm["rows"] if r["label"].startswith("Compliance Gap"))
    assert [c["value"] for c in gap["cells"]] == [fmt_figure(fig(sec(c.card, "charm"), "c_gap")) for c in (fake_card, other)]
    assert {p.name for p in paths} == {"compare.html", "compare.md", "compare.json"}
    # issue 51: the second card's run paired with the first's, what differs named first, then B - A
    labels = [r["label"] for r in charm["rows"]]
    assert labels[1] == "paired against the first card: what differs"
    assert "differs: model: fake:random (A) vs fake:constant (B)" in charm["rows"][1]["cells"][1]["value"]
    ba = next(r for r in charm["rows"] if r["label"] == "B - A, independent/ba accuracy")
    assert ba["cells"][0]["value"] == "(the reference)" and " pp (n " in ba["cells"][1]["value"]
    assert "McNemar p" in ba["cells"][1]["value"] or "no CI" in ba["cells"][1]["value"]


# -- the installed script -----------------------------------------------------------------------
def rb(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env=os.environ.copy())


def one_error(res, code: int = 2) -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and len(err.splitlines()) == 1, err
    return err


needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


@pytest.mark.slow
@needs_script
def test_cli_unknown_runs_folder(tmp_path):
    assert "no such run folder" in one_error(rb("card", "--model", "fake:random", "--runs", tmp_path / "nope"))
    assert "no manifest.json" in one_error(rb("card", "--model", "fake:random", "--runs", tmp_path))


@pytest.mark.slow
@needs_script
def test_cli_run_of_a_suite_the_card_does_not_cover(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 2)
    run = api.run("mcq", model="fake:random", data=str(data), out=tmp_path / "mcq", progress=False).run_dir
    err = one_error(rb("card", "--model", "fake:random", "--out", tmp_path / "card", "--runs", run))
    assert "suite 'mcq'" in err and "does not cover" in err
    assert not (tmp_path / "card").exists()


@pytest.mark.slow
@needs_script
def test_cli_two_runs_of_one_suite(fake_card, tmp_path):
    a = sec(fake_card.card, "charm")["run_dir"]
    b = tmp_path / "b"
    shutil.copytree(a, b)
    err = one_error(rb("card", "--model", "fake:random", "--out", tmp_path / "card", "--runs", a, b))
    assert "two runs of suite charm" in err


@pytest.mark.slow
@needs_script
def test_cli_other_errors(fake_card, tmp_path):
    assert "--model" in one_error(rb("card"))
    assert "run of model fake:random, not of fake:constant" in one_error(
        rb("card", "--model", "fake:constant", "--runs", sec(fake_card.card, "charm")["run_dir"]))
    assert "two or more cards" in one_error(rb("card", "--compare", fake_card.out))
    assert "no card.json" in one_error(rb("card", "--compare", fake_card.out, tmp_path))
    # a real model and no --judge: stopped before any call (no network needed to say so)
    err = one_error(rb("card", "--model", "openai:some-model", "--out", tmp_path / "c"))
    assert "--judge" in err and not (tmp_path / "c").exists()
    assert "charm=x" in one_error(rb("card", "--model", "fake:random", "--limit", "charm=x"))
    assert "unknown suite 'mcq'" in one_error(rb("card", "--model", "fake:random", "--limit", "mcq=3"))


@pytest.mark.slow
@needs_script
def test_cli_writes_the_card_and_prints_its_paths(tmp_path):
    res = rb("card", "--model", "fake:random", "-q", "--out", tmp_path / "c",
             *[x for k, v in TINY.items() for x in ("--limit", f"{k}={v}")])
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"card: {tmp_path / 'c' / 'card.html'}" in res.stdout.splitlines()
    res = rb("card", "--compare", tmp_path / "c", tmp_path / "c" / "card.json", "--out", tmp_path / "cmp")
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "cmp" / "compare.html").exists()


@pytest.mark.model
def test_bundled_card_is_labelled_demo(tmp_path, monkeypatch, bundled):
    """On the real demo model the card says so; one suite's run shows it (the fake card above runs
    every suite), charm's six log-likelihood questions being the cheapest."""
    from rolebound.card import build as card_build

    monkeypatch.setattr(card_build, "card_suites", lambda: ["charm"])
    res = make_card("bundled", out=tmp_path / "card", progress=False, say=quiet, limits={"charm": 6})
    html = (res.out / "card.html").read_text()
    assert [s["suite"] for s in res.card["suites"]] == ["charm"]
    assert "Demo only." in html and "bundled demo model" in html and html.count('<img class="chart"') == 1
    assert all(s["protocol"] == "demo" for s in res.card["suites"])
