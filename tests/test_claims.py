"""Claims only where the data hold them (issue 51): a report or card sentence names a direction
("leaks", "harder", "as the paper found", ...) only when its 95% CI excludes no effect, else it says
"cannot tell at this size (n = ...)"; a degenerate bootstrap interval prints the exact binomial one;
a partial run, an imported inspect log of the first samples included, never says it followed the
paper's protocol, and says what it was instead."""

from __future__ import annotations

import json

import pytest

from rolebound.report.fmt import claim, fmt_figure, fmt_rate, interval, order, rate, side
from rolebound.suites import get_suite

from helpers import needs_script, rolebound

DIRECTIONS = ("as the paper found", "unlike the paper", "the reverse of the paper", "so its capability leaks",
              "the harder to catch", "does better as another version", "holds back", "measures a No-bias",
              "the override figure depends on position", "Injection raises", "Injection lowers")


def test_a_degenerate_bootstrap_interval_is_the_exact_binomial_one():
    # one dilemma answered wrong: the percentile bootstrap says [0.0, 0.0]; the exact interval is wide
    assert interval({"rate": 0.0, "lo": 0.0, "hi": 0.0, "n": 1}) == (0.0, 97.5)
    assert fmt_rate({"rate": 0.0, "lo": 0.0, "hi": 0.0, "n": 1}) == "0.0 [0.0, 97.5]"
    assert fmt_figure(rate("k", "dilemma", {"rate": 100.0, "lo": 100.0, "hi": 100.0, "n": 20}), kind=False) \
        == "100.0% [83.2, 100.0]"
    # a real interval is kept as it is; an all-alike figure that is no 0/100% rate has none
    assert interval({"rate": 40.0, "lo": 20.0, "hi": 60.0, "n": 10}) == (20.0, 60.0)
    assert interval({"rate": 50.0, "lo": 50.0, "hi": 50.0, "n": 1}) == (None, None)
    assert interval({"diff": 0.0, "lo": 0.0, "hi": 0.0, "n": 3}) == (None, None)
    assert fmt_rate({"rate": 12.5, "lo": None, "hi": None, "n": 0}) == "12.5"


def test_side_order_and_claim_decide_in_one_place():
    above, around = {"rate": 80.0, "lo": 70.0, "hi": 90.0, "n": 50}, {"rate": 55.0, "lo": 30.0, "hi": 75.0, "n": 8}
    assert side(above, 50.0) == 1 and side(around, 50.0) == 0 and side({"rate": 10.0, "lo": 2, "hi": 30}, 50) == -1
    assert side({"rate": 60.0}, 50.0) == 0                     # no interval: no direction
    assert order(above, {"rate": 20.0, "lo": 10.0, "hi": 30.0}) == 1 and order(above, around) == 0
    assert claim(0, "up", "down", 8) == "cannot tell at this size (n = 8)"
    assert claim(1, "up", "down", 8) == "up" and claim(-1, "up", "down", 8) == "down"


def _capability(a_lo: float, a_hi: float) -> dict:
    mac = {"TA": {"mean": 0.4, "std": 0.1, "n_roles": 4}, "IA": {"mean": 0.5, "std": 0.2, "n_roles": 4},
           "A": {"mean": 0.146, "std": 0.172, "n_roles": 4, "lo": a_lo, "hi": a_hi}}
    return {"by_strategy": {"identity": {"macro": mac, "outcomes": {"valid": 12, "total": 12},
                                         "per_role": {f"r{k}": {"n_above": 3} for k in range(4)}}},
            "deltas": {}, "no_role": None}


def test_the_issues_capability_example_says_cannot_tell():
    # fake:random, A = 0.146 +- 0.172 (std across 4 roles): the issue's card said "leaks ... as the paper found"
    f = get_suite("capability").card_figures(_capability(0.02, 0.31))["finding"]
    assert "cannot tell at this size (n = 12 answers above the ceiling, 4 roles)" in f
    assert not any(d in f for d in DIRECTIONS), f
    held = get_suite("capability").card_figures(_capability(0.62, 0.91))["finding"]
    assert "leaks past the role, as the paper found" in held


def _charm(gap: dict, fail: dict, said_no: dict | None = None) -> dict:
    m = {"stage_accuracy": {"ba/all": {"rate": 90.0, "lo": 80.0, "hi": 97.0, "n": 40}},
         "matrix": {"all": {"n": 12, "compliance_gap": gap, "recognition_failure": fail}},
         "override": {"rate": None, "lo": None, "hi": None, "n": 0, "ba_pos_fc_bc": 0}}
    if said_no:
        m["ba_control"] = {"n": said_no["n"], "roles": 2, "said_no": said_no}
    return m


def test_charm_names_the_driver_of_hallucination_only_where_the_intervals_are_apart():
    close = get_suite("charm").card_figures(_charm({"rate": 41.7, "lo": 16.7, "hi": 66.7, "n": 12},
                                                   {"rate": 25.0, "lo": 8.3, "hi": 50.0, "n": 12}))["finding"]
    assert "which of the two drives hallucination: cannot tell at this size (n = 12)" in close
    assert not any(d in close for d in DIRECTIONS), close
    apart = get_suite("charm").card_figures(_charm({"rate": 80.0, "lo": 70.0, "hi": 90.0, "n": 100},
                                                   {"rate": 5.0, "lo": 1.0, "hi": 10.0, "n": 100}))["finding"]
    assert "as the paper found for all six of its models" in apart
    # the BA Yes control's No-bias sentence: from 4 questions it cannot tell, from 20 it can
    few = get_suite("charm").card_figures(_charm({"rate": 5.0}, {"rate": 5.0},
                                                 {"rate": 100.0, "lo": 100.0, "hi": 100.0, "n": 4}))["finding"]
    assert "says No to 100.0% [39.8, 100.0] of the 4 in-boundary questions" in few and "No-bias" not in few
    many = get_suite("charm").card_figures(_charm({"rate": 5.0}, {"rate": 5.0},
                                                  {"rate": 100.0, "lo": 100.0, "hi": 100.0, "n": 20}))["finding"]
    assert "[83.2, 100.0] of the 20 in-boundary questions whose answer is Yes (what the character knows): " \
           "BA here measures a No-bias" in many


def test_knowledge_errors_and_multiverse_hold_their_directions_to_the_ci():
    def cell(mean, lo, hi, n=6):
        return {"mean": mean, "sem": 0.0, "n": n, "per_repeat": [mean], "lo": lo, "hi": hi}

    def ke(kke, uke):
        return {"accuracy": {"vanilla": {"KKE": {"all": kke}, "UKE": {"all": uke}, "judgments": {}}}}

    small = get_suite("knowledge-errors").card_figures(ke(cell(16.7, 0.0, 50.0), cell(50.0, 16.7, 83.3)))["finding"]
    assert "which type is the harder one: cannot tell at this size (n = KKE 6, UKE 6)" in small
    assert not any(d in small for d in DIRECTIONS[:6]), small
    big = get_suite("knowledge-errors").card_figures(ke(cell(20.0, 12.0, 28.0, 100), cell(60.0, 50.0, 70.0, 100)))
    assert "the harder to catch, as the paper found" in big["finding"]
    mv = {"strategies": {"direct": {"canon": {"acc": {"rate": 50.0, "lo": 25.0, "hi": 75.0, "n": 8}}}},
          "cross": {"cross-direct": {"canon": {"base": "direct", "drop": {"diff": 12.5, "lo": -12.5, "hi": 37.5, "n": 8},
                                               "in_version": {"rate": 50.0}, "cross_same_items": {"rate": 37.5}}}}}
    f = get_suite("multiverse").card_figures(mv)["finding"]
    assert "whether it drops as another version: cannot tell at this size (n = 8)" in f and "paper found" not in f


@needs_script
@pytest.mark.slow
def test_no_card_sentence_on_a_small_fake_run_names_a_direction_its_ci_does_not_hold(tmp_path):
    """`rolebound card --model fake:random` on the smallest subsets, through the installed script."""
    r = rolebound("card", "--model", "fake:random", "--limit", "charm=40", "--limit", "knowledge-errors=8",
                  "--limit", "multiverse=16", "--limit", "capability=4", "--out", tmp_path / "card", "-q",
                  timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    card = json.loads((tmp_path / "card" / "card.json").read_text())
    for s in card["suites"]:
        figs = {f["key"]: f for f in s["figures"]}
        metrics = json.loads((tmp_path / "card" / "runs" / s["suite"] / "metrics.json").read_text())
        said = [d for d in DIRECTIONS if d in s["finding"]]
        if s["suite"] == "charm":
            held = bool(order(figs["c_gap"], figs["r_fail"]))
            assert bool({"as the paper found", "the reverse of the paper"} & set(said)) == held, s["finding"]
        elif s["suite"] == "capability":
            a = metrics["by_strategy"]["identity"]["macro"]["A"]
            held = side({"value": a["mean"], "lo": a["lo"], "hi": a["hi"], "unit": "0-1"}, 0.25) != 0
            assert bool({"so its capability leaks", "holds back"} & set(said)) == held, s["finding"]
        if not said:
            assert "cannot tell at this size (n = " in s["finding"] or "no cross-version" in s["finding"], s
        assert "followed the paper's protocol" not in s.get("paper_protocol", "")
    md = (tmp_path / "card" / "card.md").read_text()
    assert "followed the paper's protocol" not in md


@needs_script
@pytest.mark.slow
def test_an_imported_five_sample_inspect_log_never_claims_the_papers_protocol(tmp_path):
    """`inspect eval` of the charm task with inspect's --limit 5 (mockllm), then `rolebound import inspect`
    through the installed script: the report says what the run was, never that it followed the paper."""
    pytest.importorskip("inspect_ai", reason="the [inspect] extra (inspect_ai) is not installed")
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from rolebound.inspect import tasks

    def outputs():
        while True:
            out = ModelOutput.from_content(model="mockllm", content="Answer: 1")
            out.usage = ModelUsage(input_tokens=1, output_tokens=2, total_tokens=3)
            yield out

    model = get_model("mockllm/model", custom_outputs=outputs(), memoize=False)
    [log] = inspect_eval(tasks.charm(set="similarity=false"), model=model, limit=5,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    r = rolebound("import", "inspect", log.location, "--out", tmp_path / "run", timeout=300)
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "run" / "report.md").read_text()
    assert "followed the paper's protocol" not in md and "(the paper's protocol)" not in md
    assert "5 of 2816 items, the first samples of the inspect task (inspect's --limit 5), asked of " \
           "inspect:mockllm/model" in md
