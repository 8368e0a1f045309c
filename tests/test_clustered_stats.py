"""Issue 51: clustered uncertainty, paired comparison of runs, what a run can detect."""

from __future__ import annotations

import json
import random

import pytest

from rolebound import api, stats
from rolebound.records import Record
from rolebound.report import fmt
from rolebound.stats import clustered_se, cluster_key, mcnemar, paired_diff, rate_ci

from helpers import needs_script, rolebound, write_mcq


def _scores(seed: int, clusters: int, per: int, strength: float):
    """0/1 outcomes in clusters that share a cluster-level rate (strength: how much they share)."""
    rng = random.Random(seed)
    values, keys = [], []
    for c in range(clusters):
        p = min(max(0.5 + strength * (rng.random() - 0.5), 0.0), 1.0)
        for _ in range(per + rng.randrange(3)):
            values.append(rng.random() < p)
            keys.append(f"c{c}")
    return values, keys


@pytest.mark.parametrize("seed,clusters,per,strength", [(0, 184, 4, 0.9), (1, 30, 20, 0.6), (2, 12, 1, 0.0),
                                                        (3, 2, 5, 1.0)])
def test_clustered_se_is_inspect_ais_own(seed, clusters, per, strength):
    """The same scores through inspect_ai's stderr(cluster=...) and through stats.clustered_se."""
    from inspect_ai.scorer import SampleScore, Score
    from inspect_ai.scorer._metrics.std import stderr

    values, keys = _scores(seed, clusters, per, strength)
    scores = [SampleScore(score=Score(value=float(v)), sample_id=i, sample_metadata={"prompt": k})
              for i, (v, k) in enumerate(zip(values, keys))]
    theirs = stderr(cluster="prompt")(scores)
    assert clustered_se(values, keys) == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    # and the unclustered SE is inspect_ai's plain stderr()
    assert stats.item_se(values) == pytest.approx(stderr()(scores), rel=1e-12)


def test_cluster_bootstrap_widens_a_repeated_design_and_reports_it():
    """184 prompts asked 4 times each, the copies mostly agreeing (CHARM KV's shape): the
    clustered half-width is well over the item-level one, and the dict says why."""
    rng = random.Random(7)
    values, keys = [], []
    for c in range(184):
        answer = rng.random() < 0.3
        for _ in range(4):
            values.append(answer if rng.random() < 0.9 else not answer)
            keys.append(f"fact={c}")
    item, clus = rate_ci(values), rate_ci(values, keys)
    assert clus["rate"] == item["rate"]
    assert (clus["hi"] - clus["lo"]) >= 1.5 * (item["hi"] - item["lo"])
    assert clus["clusters"] == 184 and clus["trusted"] is True
    assert clus["deff"] == pytest.approx((clus["se"] / clus["se_item"]) ** 2) and clus["deff"] > 2
    assert clus["mdd"] == pytest.approx((stats.Z_975 + stats.Z_80) * 2 ** 0.5 * clus["se"])
    # singletons: each item its own cluster gives the item-level SE (design effect ~1)
    single = rate_ci(values, [str(i) for i in range(len(values))])
    assert single["deff"] == pytest.approx(len(values) / (len(values) - 1) * (len(values) - 1) / len(values), rel=0.01)


def test_cluster_bootstrap_is_seeded_and_independent_of_record_order():
    values, keys = _scores(3, 40, 5, 0.8)
    pairs = list(zip(values, keys))
    random.Random(1).shuffle(pairs)
    assert rate_ci(values, keys) == rate_ci([v for v, _ in pairs], [k for _, k in pairs])


def test_strata_are_resampled_apart():
    """Two fixed strata of very different rates: resampling clusters across them would mix their
    shares; within them the interval stays near the item-level one."""
    values = [True] * 200 + [False] * 200
    keys = [f"boundary=cross{stats.STRATUM}t{i % 20}" for i in range(200)] + \
           [f"boundary=temporal{stats.STRATUM}t{i % 20}" for i in range(200)]
    d = rate_ci(values, keys)
    assert d["lo"] == d["hi"] == 50.0 and d["se"] == 0.0     # every cluster pure, shares fixed: no spread
    mixed = rate_ci(values, [k.replace(stats.STRATUM, "/") for k in keys])     # the same clusters, no strata
    assert mixed["hi"] - mixed["lo"] > 10


def _rec(item: str, stage: str, repeat: int = 0, **meta) -> Record:
    return Record(call_id=f"{item}/{stage}", item_id=item, suite="x", strategy="s", stage=stage, repeat=repeat,
                  kind="chat", model="fake:random", prompt=[], meta=meta)


def test_cluster_key_follows_the_declaration_and_repeats_share_one():
    spec = {"kv": ("fact",), "bc": ("fact", "target"), "strata": ("boundary",)}
    assert cluster_key(_rec("kv/a/f1", "kv", fact="f1", boundary="cross"), spec) == "boundary=cross||fact=f1"
    assert cluster_key(_rec("bc/a/t", "bc", target="phone", boundary="temporal"), spec) == \
        "boundary=temporal||target=phone"
    # nothing declared for the stage: the item, whatever the repeat
    assert cluster_key(_rec("q1", "mcq", 0), {}) == cluster_key(_rec("q1", "mcq", 3), {}) == "item=q1"
    assert stats.cluster_by_text(spec, "bc") == "fact, else target, within boundary"


def test_under_ten_clusters_no_bracket_is_printed():
    values, keys = [True, False, True, True, False, True], ["a", "a", "b", "b", "c", "c"]
    d = rate_ci(values, keys)
    assert d["trusted"] is False and d["clusters"] == 3
    assert fmt.fmt_rate(d) == "66.7 (no CI: 3 clusters, too few to trust one)"
    assert fmt.fmt_rate(rate_ci([True, False])) == "50.0 (no CI: 2 clusters, too few to trust one)"
    assert "[" in fmt.fmt_rate(rate_ci([i % 3 == 0 for i in range(30)]))
    assert fmt.MIN_CLUSTERS == stats.MIN_CLUSTERS


def test_a_claim_is_held_only_by_the_clustered_interval():
    # 40 answers in 4 clusters, wholly above 50% by the bracket: under 10 clusters no claim reads it
    few = {"rate": 80.0, "lo": 70.0, "hi": 90.0, "n": 40, "clusters": 4}
    assert fmt.interval(few) == (None, None) and fmt.side(few, 50.0) == 0
    assert fmt.interval({**few, "clusters": 12}) == (70.0, 90.0) and fmt.side({**few, "clusters": 12}, 50.0) == 1
    # a card figure carries its clusters (its n may count something else): shown and read alike
    f = fmt.rate("k", "said No", few)
    assert f["clusters"] == 4 and fmt.side(f, 50.0) == 0
    assert fmt.fmt_figure(f) == "80.0% (no CI: 4 clusters, too few to trust one)"
    assert "cannot tell" in fmt.claim(fmt.side(f, 50.0), "No-bias", "not", f["n"])
    # all alike: the exact binomial interval over the clusters, not the 40 answers
    alike = fmt.rate("k", "said No", {"rate": 100.0, "lo": 100.0, "hi": 100.0, "n": 40, "clusters": 4})
    assert fmt.fmt_figure(alike) == "100.0% [39.8, 100.0]"
    assert fmt.interval({"rate": 100.0, "lo": 100.0, "hi": 100.0, "n": 40})[0] == pytest.approx(91.2, abs=0.05)


def test_paired_difference_and_mcnemar_exact():
    from scipy.stats import binomtest

    a = {f"q{i}": i % 2 == 0 for i in range(40)}
    b = {f"q{i}": (i % 2 == 0) or i % 5 == 1 for i in range(36)} | {"extra": True}
    d = paired_diff(a, b)
    assert d["n"] == 36 and d["only_a"] == 4 and d["only_b"] == 1
    a_only = sum(1 for k in b if k in a and a[k] and not b[k])
    b_only = sum(1 for k in b if k in a and b[k] and not a[k])
    assert (d["a_only"], d["b_only"]) == (a_only, b_only)
    assert d["p"] == pytest.approx(binomtest(b_only, a_only + b_only, 0.5).pvalue)
    assert d["diff"] == pytest.approx(100.0 * (b_only - a_only) / 36)
    assert d["lo"] <= d["diff"] <= d["hi"]
    assert mcnemar([True, False], [True, False]) == {"a_only": 0, "b_only": 0, "p": 1.0}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pair")
    data = write_mcq(tmp / "q.jsonl", 40)
    runs = {}
    # made in-process: the tests below run the script on these folders
    for name, model, limit in (("a", "fake:random", None), ("b", "fake:constant", 30)):
        api.run("mcq", model=model, data=str(data), limit=limit, out=tmp / name, progress=False)
        runs[name] = tmp / name
    other = write_mcq(tmp / "other.jsonl", 12)
    api.run("mcq", model="fake:random", data=str(other), out=tmp / "other", progress=False)
    runs["other"] = tmp / "other"
    return tmp, runs


@needs_script
def test_compare_prints_paired_differences_after_what_differs(two_runs):
    tmp, runs = two_runs
    r = rolebound("compare", runs["a"], runs["b"], "--out", tmp / "cmp")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    first_number = next(i for i, line in enumerate(out) if "B - A" in line)
    differs = [i for i, line in enumerate(out) if line.startswith("differs: ")]
    assert differs and max(differs) < first_number
    assert "differs: model: fake:random (A) vs fake:constant (B)" in out
    assert "differs: limit: none (A) vs 30 (B)" in out
    assert "only one run holds 10 answered calls (10 only A, 0 only B): left out of the differences" in out
    line = out[first_number]
    assert line.startswith("direct/answer: B - A ") and "on 30 calls in 30 clusters" in line and "McNemar p " in line
    assert "[" in line
    md = (tmp / "cmp" / "compare.md").read_text()
    assert "Paired differences, B - A" in md and "McNemar p" in md


@needs_script
def test_compare_refuses_runs_on_other_data(two_runs):
    tmp, runs = two_runs
    r = rolebound("compare", runs["a"], runs["other"], "--out", tmp / "cmp2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "ran on other data" in lines[0] and "dataset hash" in lines[0]
    assert not (tmp / "cmp2").exists()


def test_the_headline_table_gives_the_mdd_and_a_limit_run_that_of_the_whole_set(two_runs):
    tmp, runs = two_runs
    m = json.loads((runs["b"] / "manifest.json").read_text())
    assert m["n_items"] == 30 and m["dataset_items"] == 40 and m["limit"] == 30
    met = json.loads((runs["b"] / "metrics.json").read_text())["by_strategy"]["direct"]
    md = (runs["b"] / "report.md").read_text()
    table = md[md.index("## Headline figures"):]
    assert "| clustered by | clusters | design effect |" in table and "MDD, whole set of 40 items (pp)" in table
    row = next(line for line in table.splitlines() if line.startswith("| accuracy |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:6] == ["item", "30", f"{met['deff']:.2f}"]
    assert cells[7] == f"{met['mdd']:.1f}" and cells[8] == f"{met['mdd'] * (30 / 40) ** 0.5:.1f}"
    whole = json.loads((runs["a"] / "manifest.json").read_text())
    assert "whole set" not in (runs["a"] / "report.md").read_text() and whole["limit"] is None


def test_repeats_of_an_item_share_its_cluster(tmp_path):
    from rolebound import api

    res = api.run("mcq", model="fake:random", data=str(write_mcq(tmp_path / "q.jsonl", 12)), repeats=2,
                  decoding={"temperature": 0.7}, out=tmp_path / "r", progress=False)
    acc = res.metrics["by_strategy"]["direct"]
    assert acc["n"] == 24 and acc["clusters"] == 12
