"""`rolebound judge-check`: agreement statistics with known answers, the JSONL format's one-line
errors, and the whole check on `fake:` (recorded, resumed without calls, the same figures from
shuffled records), also through the installed script."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rolebound.errors import InputError
from rolebound.io import stable_hash
from rolebound.judgecheck.metrics import agreement, kappa, kendall, mae, spearman, table
from rolebound.judgecheck import run as jc
from rolebound.judgecheck.data import read_labelled
from rolebound.judgecheck.spec import Scale

SCRIPT = Path(sys.executable).with_name("rolebound")
GRID = Scale("ordinal", (0, 1, 2, 3, 4, 5)).grid()     # half points: 11 values


def idx(values):
    return [int(round(v * 2)) for v in values]        # 0-5 scores on the half-point grid


# -- statistics ---------------------------------------------------------------------------------
def test_statistics_on_hand_made_pairs():
    a, b = idx([0, 1, 2, 3]), idx([0, 1, 3, 2])
    r = agreement(a, b, GRID, resamples=50)
    assert r["n"] == 4
    assert r["spearman"]["value"] == pytest.approx(0.8, abs=1e-4)  # 1 - 6*2 / (4*15)
    assert r["kendall"]["value"] == pytest.approx(4 / 6, abs=1e-4)  # 5 concordant, 1 discordant of 6 pairs
    assert r["exact"]["value"] == 0.5
    assert r["mae"]["value"] == 0.5
    # quadratic kappa by hand: observed sum (i-j)^2 = 2, expected = sum over all cross pairs / n
    obs = 2 / 4
    exp = sum((x - y) ** 2 for x in [0, 1, 2, 3] for y in [0, 1, 3, 2]) / 16
    assert r["qwk"]["value"] == pytest.approx(1 - obs / exp, abs=1e-4)


def test_perfect_and_reversed_agreement():
    a = idx([0, 1, 2, 3, 4, 5, 5, 1])
    same = agreement(a, a, GRID, resamples=20)
    assert [same[s]["value"] for s in ("spearman", "kendall", "qwk", "exact", "mae")] == [1, 1, 1, 1, 0]
    rev = agreement(idx([0, 1, 2, 3]), idx([3, 2, 1, 0]), GRID, resamples=20)
    assert rev["spearman"]["value"] == -1 and rev["kendall"]["value"] == -1


def test_yes_no_accuracy_and_kappa():
    grid = ["yes", "no"]
    a, b = [0, 0, 1, 1], [0, 1, 1, 1]                 # yes yes no no / yes no no no
    r = agreement(a, b, grid, "nominal", resamples=20)
    assert r["accuracy"]["value"] == 0.75
    assert r["kappa"]["value"] == pytest.approx(0.5, abs=1e-4)  # po 0.75, pe 0.5


def test_tables_match_scipy_and_sklearn_with_ties():
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, 300)
    b = np.clip(a + rng.integers(-2, 3, 300), 0, 5)
    t = table(a, b, 6)
    assert spearman(t) == pytest.approx(spearmanr(a, b)[0])
    assert kendall(t) == pytest.approx(kendalltau(a, b)[0])
    assert kappa(t, "quadratic") == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=range(6)))
    assert kappa(t) == pytest.approx(cohen_kappa_score(a, b))
    assert mae(t, range(6)) == pytest.approx(np.abs(a - b).mean())


def test_bootstrap_is_deterministic_and_brackets_the_estimate():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 11, 80)
    b = np.clip(a + rng.integers(-3, 4, 80), 0, 10)
    one, two = agreement(a, b, GRID), agreement(a, b, GRID)
    assert one == two
    for s in ("spearman", "kendall", "qwk", "exact", "mae"):
        assert one[s]["lo"] <= one[s]["value"] <= one[s]["hi"]
        assert one[s]["lo"] < one[s]["hi"]


# what the pair bootstrap of this file's commit 3180783 gave for the same 80 pairs (seed 0, 1,000 resamples)
PAIR_BOOTSTRAP = {"spearman": (0.8541, 0.7858, 0.895), "kendall": (0.7018, 0.6362, 0.7628),
                  "qwk": (0.8525, 0.7966, 0.8937), "exact": (0.175, 0.0875, 0.2625), "mae": (0.7188, 0.6188, 0.825)}


def test_each_reply_its_own_cluster_gives_the_pair_bootstrap_figures():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 11, 80)
    b = np.clip(a + rng.integers(-3, 4, 80), 0, 10)
    for clusters in (None, [f"reply=r{i:02d}" for i in range(80)]):
        got = agreement(a, b, GRID, clusters=clusters)
        assert {s: (got[s]["value"], got[s]["lo"], got[s]["hi"]) for s in PAIR_BOOTSTRAP} == PAIR_BOOTSTRAP
        assert got["clusters"] == 80 and got["trusted"] is True
        assert got["exact"]["deff"] == pytest.approx(1.0)      # independent replies: no design effect


def test_replies_repeated_as_one_cluster_give_the_interval_of_the_replies_once():
    """Five copies of each reply (five models' replies to one question, all alike) carry the
    information of one: resampled as clusters they give the interval of the replies once; resampled
    as pairs (the bootstrap before clusters) an interval about sqrt(5) times too narrow."""
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2, 40)
    b = np.where(rng.random(40) < 0.7, a, 1 - a)
    once = agreement(a, b, ["yes", "no"], "nominal")
    five = agreement(np.repeat(a, 5), np.repeat(b, 5), ["yes", "no"], "nominal",
                     clusters=[f"q{i:02d}" for i in range(40) for _ in range(5)])     # keys sorted as the pairs
    pairs = agreement(np.repeat(a, 5), np.repeat(b, 5), ["yes", "no"], "nominal")
    assert five["n"] == 200 and five["clusters"] == 40 and pairs["clusters"] == 200
    for s in ("accuracy", "kappa"):
        assert (five[s]["value"], five[s]["lo"], five[s]["hi"]) == (once[s]["value"], once[s]["lo"], once[s]["hi"])
        assert pairs[s]["hi"] - pairs[s]["lo"] < 0.6 * (five[s]["hi"] - five[s]["lo"])
    assert five["accuracy"]["deff"] == pytest.approx(5, rel=0.1)       # the clustered variance is ~5x
    assert pairs["accuracy"]["deff"] == pytest.approx(1.0)


def test_below_ten_clusters_no_interval():
    a, b = idx([1, 2, 3, 4, 5] * 4), idx([1, 2, 3, 5, 4] * 4)
    few = agreement(a, b, GRID, clusters=[i % 9 for i in range(20)])
    assert few["clusters"] == 9 and few["trusted"] is False
    assert all(few[s]["lo"] is None and few[s]["hi"] is None for s in ("spearman", "kendall", "qwk", "exact", "mae"))
    assert few["exact"]["value"] == 0.6 and few["exact"]["deff"] is not None       # the point stays
    assert agreement(a, b, GRID, clusters=[i % 10 for i in range(20)])["exact"]["lo"] is not None
    from rolebound.judgecheck.report import stat_text

    assert stat_text(few, "exact") == "0.60 (no CI: 9 clusters, too few to trust one)"


def test_constant_rater_gives_no_correlation():
    r = agreement(idx([4, 4, 4, 4]), idx([1, 2, 3, 4]), GRID, resamples=20)
    assert r["spearman"]["value"] is None and r["exact"]["value"] == 0.25


# -- the JSONL format -----------------------------------------------------------------------------
def mv_row(i: int, **over) -> dict:
    row = {"id": f"r{i}", "reply": f"*smirks* I would build another suit, number {i}.", "group": "mA" if i % 2 else "mB",
           "context": {"character": "Tony Stark", "lore": "MCU", "task": "canon"},
           "labels": {"ann1": {"thinking": i % 6, "acting": (i + 1) % 6}, "ann2": {"thinking": (i + 1) % 6, "acting": i % 6}}}
    row.update(over)
    return row


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def multiverse_check():
    return jc.spec_of("multiverse")[1]


@pytest.mark.parametrize("bad, field", [
    ({"reply": ""}, "reply"),
    ({"labels": {"ann1": {"thinkin": 3}}}, "labels.ann1.thinkin"),
    ({"labels": {"ann1": {"thinking": 7}}}, "labels.ann1.thinking"),
    ({"labels": {}}, "labels"),
    ({"context": {"lore": "MCU"}}, "context.character"),
    ({"id": "r0"}, "id"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, bad, field):
    path = write_rows(tmp_path / "labels.jsonl", [mv_row(0), mv_row(1, **bad)])
    with pytest.raises(InputError) as e:
        read_labelled(path, multiverse_check())
    msg = str(e.value)
    assert msg.startswith(f"{path}:2, field '{field}'"), msg
    assert "\n" not in msg


def test_a_rows_cluster_field(tmp_path):
    check = multiverse_check()
    rows = read_labelled(write_rows(tmp_path / "l.jsonl", [mv_row(0, cluster="q1"), mv_row(1)]), check)
    assert rows[0].cluster == "q1" and rows[1].cluster is None
    assert check.cluster(rows[0]) == ("cluster=q1", "the rows' cluster field")
    assert check.cluster(rows[1]) == ("reply=r1", "reply (each its own)")      # no task and cid: the reply alone
    from rolebound.judgecheck.data import rows_hash

    # a row without a cluster hashes as before the field existed (an earlier run resumes)
    assert rows_hash(rows[1:]) == stable_hash([{k: v for k, v in rows[1].model_dump().items() if k != "cluster"}])


def test_null_labels_and_half_points_of_the_mean(tmp_path):
    rows = [mv_row(i) for i in range(4)]
    rows[0]["labels"]["ann2"]["thinking"] = None
    got = read_labelled(write_rows(tmp_path / "l.jsonl", rows), multiverse_check())
    assert got[0].labels["ann2"]["thinking"] is None
    assert Scale("ordinal", (0, 1, 2, 3, 4, 5)).index(3.5) == 7


# -- the whole check on fake: ---------------------------------------------------------------------
def test_judge_check_records_resumes_and_ignores_record_order(tmp_path):
    data = write_rows(tmp_path / "labels.jsonl", [mv_row(i) for i in range(12)])
    out = tmp_path / "run"
    first = jc.run("multiverse", "fake:random", data=data, out=out, progress=False, resamples=200)
    assert first.counts["model_calls"] > 0
    m = first.metrics
    assert m["rows"] == 12 and m["verdicts"]["read"] + m["verdicts"]["unread"] == 12
    block = m["scores"]["thinking"]["groups"]
    assert set(block) == {"all", "mA", "mB"}
    assert set(block["all"]) == {"ann1", "ann2", "mean", "humans"}
    assert "exact" not in block["all"]["mean"] and "qwk" in block["all"]["mean"]
    assert m["scores"]["describe"]["judged"] is False and set(m["scores"]["describe"]["groups"]["all"]) <= {"humans"}
    again = jc.run("multiverse", "fake:random", data=data, out=out, progress=False, resamples=200)
    assert again.counts["model_calls"] == 0 and again.counts["cache_hits"] == 0 and again.counts["resumed"] > 0
    assert again.metrics == m
    lines = (out / "records.jsonl").read_text().splitlines()
    random.Random(1).shuffle(lines)
    (out / "records.jsonl").write_text("\n".join(lines) + "\n")
    rebuilt, paths = jc.build(out, resamples=200)
    assert rebuilt == m
    assert {p.name for p in paths} == {"report.md", "report.html"}
    assert "humans (ceiling)" in (out / "report.md").read_text()
    # the card's line on this judge, found among the judge-check runs under a folder
    from rolebound.judgecheck.card import judge_line

    line = judge_line("multiverse", "fake:random", [tmp_path])
    assert line.startswith("Judge checked against human labels") and "Spearman rho" in line and "human ceiling" in line
    assert judge_line("multiverse", "fake:echo", [tmp_path]) is None
    assert judge_line("knowledge-errors", "fake:random", [tmp_path]) is None


def test_another_limit_is_a_different_run(tmp_path):
    from rolebound.errors import RoleboundError

    data = write_rows(tmp_path / "labels.jsonl", [mv_row(i) for i in range(6)])
    jc.run("multiverse", "fake:random", data=data, out=tmp_path / "run", limit=3, progress=False, resamples=20)
    with pytest.raises(RoleboundError, match="different run"):
        jc.run("multiverse", "fake:random", data=data, out=tmp_path / "run", limit=4, progress=False, resamples=20)


def test_knowledge_errors_yes_no_verdicts(tmp_path):
    rows = [{"id": f"k{i}", "reply": "I never heard of such a thing, sir.",
             "context": {"character": "Hermione", "error_type": "UKE" if i % 2 else "KKE",
                         "correct_memory": "She attended Hogwarts.", "query": "Did you study at Beauxbatons?"},
             "labels": {"a": {"verdict": "yes" if i % 3 else "no"}, "b": {"verdict": "yes" if i % 2 else "no"}}}
            for i in range(8)]
    res = jc.run("knowledge-errors", "fake:random", data=write_rows(tmp_path / "k.jsonl", rows),
                 out=tmp_path / "run", progress=False, resamples=50)
    allg = res.metrics["scores"]["verdict"]["groups"]["all"]
    assert set(allg) == {"a", "b", "humans"}
    assert set(allg["humans"]) == {"n", "clusters", "trusted", "accuracy", "kappa"} and allg["humans"]["n"] == 8
    # the eight replies are about one memory (character and correct_memory): one cluster, no interval
    assert allg["humans"]["clusters"] == 1 and allg["humans"]["trusted"] is False
    assert allg["humans"]["accuracy"]["lo"] is None and allg["humans"]["kappa"]["hi"] is None
    assert res.metrics["clustered_by"].startswith("memory")
    assert allg["humans"]["accuracy"]["value"] == pytest.approx(sum((i % 3 > 0) == (i % 2 > 0) for i in range(8)) / 8)


def test_capability_scores(tmp_path):
    rows = [{"id": f"c{i}", "reply": "Well, as a child I think it is B because it is bigger. \\boxed{B}",
             "context": {"role": "child", "capability": "a seven-year-old's knowledge", "style": "simple words",
                         "question": "Which is larger?", "options": ["1", "2"]},
             "labels": {"a": {"RV": i % 3, "C": 2, "RC": 1}}} for i in range(4)]
    res = jc.run("capability", "fake:random", data=write_rows(tmp_path / "c.jsonl", rows), out=tmp_path / "run",
                 progress=False, resamples=20)
    assert set(res.metrics["scores"]) == {"RV", "C", "RC"}
    assert set(res.metrics["scores"]["RV"]["groups"]["all"]) == {"a"}


# -- the installed script ---------------------------------------------------------------------------
def rb(*args, cwd=None):
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ})


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
def test_cli_end_to_end_and_one_line_errors(tmp_path):
    # three questions, each answered twice: the rows' own cluster field
    data = write_rows(tmp_path / "labels.jsonl", [mv_row(i, cluster=f"q{i % 3}") for i in range(6)])
    ok = rb("judge-check", "multiverse", "--judge", "fake:random", "--data", data, "--out", tmp_path / "run", "-q")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "humans (ceiling)" in ok.stdout and "judge vs mean" in ok.stdout
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["rows"] == 6 and metrics["clustered_by"] == "the rows' cluster field"
    assert metrics["scores"]["thinking"]["groups"]["all"]["ann1"]["clusters"] == 3
    # 3 clusters: the report and the terminal say why there is no interval, and print no bracket
    assert "no CI: 3 clusters" in ok.stdout and "too few to trust one" in ok.stdout
    assert "clustered by: the rows' cluster field" in ok.stdout
    md = (tmp_path / "run" / "report.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| all | judge vs ann1 |")]
    assert rows and all("[" not in r and "(no CI: 3 clusters, too few to trust one)" in r for r in rows)
    again = rb("judge-check", "multiverse", "--judge", "fake:random", "--data", data, "--out", tmp_path / "run", "-q")
    assert again.returncode == 0 and "0 judge calls" in again.stdout
    before = (tmp_path / "run" / "metrics.json").read_text()
    rebuilt = rb("report", tmp_path / "run", "-q")       # `rolebound report` knows a judge-check folder
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert (tmp_path / "run" / "metrics.json").read_text() == before
    humans = rb("judge-check", "multiverse", "--data", data, "--humans-only")      # no judge at all
    assert humans.returncode == 0 and "humans (ceiling)" in humans.stdout and "judge vs" not in humans.stdout
    bad = write_rows(tmp_path / "bad.jsonl", [mv_row(0), mv_row(1, labels={"ann1": {"acting": "high"}})])
    badc = write_rows(tmp_path / "badc.jsonl", [mv_row(0), mv_row(1, cluster=5)])
    for args, needle in [(("multiverse", "--data", bad), f"{bad}:2, field 'labels.ann1.acting'"),
                         (("multiverse", "--data", badc), f"{badc}:2, field 'cluster'"),
                         (("mcq", "--data", data), "has no judge"),
                         (("multiverse", "--data", tmp_path / "missing.jsonl"), "file not found")]:
        res = rb("judge-check", args[0], "--judge", "fake:random", *args[1:], "--out", tmp_path / "x", "-q")
        err = res.stderr.strip()
        assert res.returncode == 2, (args, res.stderr[-1500:])
        assert "Traceback" not in res.stderr and len(err.splitlines()) == 1 and needle in err, err


def test_the_card_shows_the_judge_line_escaped(tmp_path):
    from rolebound.card.render import write_card

    section = {"suite": "multiverse", "title": "Beyond One World", "run_dir": "r", "reused": False, "report": None,
               "model": "fake:random", "judge": "fake:random", "self_judged": False, "protocol": "demo",
               "protocol_label": "", "strategies": ["direct"], "scoring": None, "limit": None, "n_items": 0,
               "repeats": 1, "started": "", "finished": "", "model_calls": 0, "figures": [], "finding": "",
               "chart": None, "problems": [],
               "judge_agreement": "Judge checked against human labels (3 of 3 verdicts read; runs/<x>): thinking: ..."}
    card = {"card": 1, "model": "fake:random", "judge": "fake:random", "demo": True, "created": "now",
            "rolebound": "0", "git": None, "suites": [section]}
    write_card(card, tmp_path)
    html = (tmp_path / "card.html").read_text()
    assert "Judge checked against human labels" in html and "runs/&lt;x&gt;" in html
    assert "Judge checked against human labels" in (tmp_path / "card.md").read_text()


def test_cli_judge_options_reach_the_judge_backend(tmp_path):
    """--judge-base-url / --judge-opt: a run's own judge settings, so that a check asks what the run
    asked (and an unknown option is one line)."""
    from rolebound.testing.fake_server import FakeServer

    data = write_rows(tmp_path / "labels.jsonl", [mv_row(i) for i in range(3)])
    with FakeServer(reply="Thinking: 4\nActing: 3") as srv:
        res = rb("judge-check", "multiverse", "--judge", "openai:judge", "--judge-base-url", srv.url + "/v1",
                 "--judge-opt", "concurrency=2", "--data", data, "--out", tmp_path / "run", "-q")
        assert res.returncode == 0, res.stderr[-2000:]
        assert srv.stats.requests >= 3 and srv.stats.max_in_flight <= 2
    bad = rb("judge-check", "multiverse", "--judge", "fake:random", "--judge-opt", "nosuch=1", "--data", data,
             "--out", tmp_path / "x", "-q")
    err = bad.stderr.strip()
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(err.splitlines()) == 1, bad.stderr[-1500:]
    assert "nosuch" in err, err


def test_the_per_reply_table_shows_a_yes_no_judges_verdict(tmp_path):
    """A yes/no judge (knowledge-errors) parses to a string, not a dict of scores: the per-reply
    table shows its verdict as the metrics read it, never "unread"."""
    from rolebound.testing.fake_server import FakeServer

    labels = Path(__file__).parent / "data" / "judge_labels" / "knowledge_errors_roleke_qwen.jsonl"
    with FakeServer(reply="The reply names the error.\njudgment: yes") as srv:
        res = jc.run("knowledge-errors", "openai:judge", data=labels, limit=4, out=tmp_path / "run", progress=False,
                     judge_options={"base_url": srv.url + "/v1"})
    assert res.metrics["verdicts"]["read"] == 4
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert html.count("verdict yes") >= 4 and ">unread<" not in html and '"unread"' not in html
