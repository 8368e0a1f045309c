"""TA, IA, A per role, macro averages with the sample std (Table 3), deltas, outcome kinds and
judge means, all from hand-made records."""

from __future__ import annotations

import math

import pytest

from rolebound.report.fmt import fmt_mean_sd
from rolebound.suites.capability import metrics as cm
from rolebound.records import Record

LEVELS = {"elementary": 0, "a_level": 3}
ROLES = {"kindergarten": (0, None), "primary": (1, "elementary"), "college": (4, "a_level")}


def rec(strategy, role, level, correct, n, *, response=None, error=None):
    rank, ceiling = ROLES[role] if role else (None, None)
    in_role = None if role is None else (ceiling is not None and LEVELS[level] <= LEVELS[ceiling])
    meta = {"level": level, "level_name": level.title(), "level_rank": LEVELS[level], "subject": "mathematics",
            "role": role, "in_role": in_role}
    if role:
        meta.update(role_label=role.title(), role_rank=rank, ceiling=ceiling)
    stage = f"answer.{role}" if role else "answer"
    if response is None:
        response = "\\boxed{A}" if correct else "\\boxed{B}"
    return Record(call_id=f"{level}{n}/{strategy}/{stage}", item_id=f"{level}{n}", suite="capability",
                  strategy=strategy, stage=stage, kind="chat", response=None if error else response,
                  parsed="A" if correct else "B", gold="A", correct=None if error else correct, error=error,
                  meta=meta)


def identity_records():
    """4 elementary + 4 A-level questions per role. Correct answers:
    kindergarten: elem 3/4, A-level 1/4 -> TA 4/8, IA -, A 4/8
    primary:      elem 4/4, A-level 2/4 -> TA 6/8, IA 4/4, A 2/4
    college:      elem 2/4, A-level 3/4 -> TA 5/8, IA 5/8, A -
    """
    plan = {"kindergarten": (3, 1), "primary": (4, 2), "college": (2, 3)}
    out = []
    for role, (ce, ca) in plan.items():
        for i in range(4):
            out.append(rec("identity", role, "elementary", i < ce, i))
            out.append(rec("identity", role, "a_level", i < ca, i))
    return out


def test_ta_ia_a_per_role():
    m = cm.compute(identity_records(), ["identity"])
    pr = m["by_strategy"]["identity"]["per_role"]
    assert pr["kindergarten"]["TA"] == 0.5 and pr["kindergarten"]["IA"] is None and pr["kindergarten"]["A"] == 0.5
    assert (pr["primary"]["TA"], pr["primary"]["IA"], pr["primary"]["A"]) == (0.75, 1.0, 0.5)
    assert pr["college"]["TA"] == 0.625 and pr["college"]["IA"] == 0.625 and pr["college"]["A"] is None
    assert (pr["primary"]["n_in"], pr["primary"]["n_above"]) == (4, 4)
    # IA and A partition TA's questions
    for r in pr.values():
        assert r["n_in"] + r["n_above"] == r["n"] == 8


def test_macro_mean_and_sample_std_across_roles():
    mac = cm.compute(identity_records(), ["identity"])["by_strategy"]["identity"]["macro"]
    ta = [0.5, 0.75, 0.625]
    mean = sum(ta) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in ta) / 2)        # ddof = 1
    assert mac["TA"]["mean"] == pytest.approx(mean) and mac["TA"]["std"] == pytest.approx(sd)
    assert mac["TA"]["n_roles"] == 3
    # IA: only primary and college have in-role questions; A: only kindergarten and primary
    assert mac["IA"]["mean"] == pytest.approx((1.0 + 0.625) / 2) and mac["IA"]["n_roles"] == 2
    assert mac["IA"]["std"] == pytest.approx(math.sqrt(2 * ((1.0 - 0.8125) ** 2)))
    assert mac["A"]["mean"] == pytest.approx(0.5) and mac["A"]["std"] == pytest.approx(0.0)


def test_grid_marks_above_ceiling_cells():
    grid = cm.compute(identity_records(), ["identity"])["by_strategy"]["identity"]["grid"]
    assert grid["kindergarten"]["elementary"] == {"acc": 0.75, "n": 4, "above": True}
    assert grid["primary"]["elementary"]["above"] is False and grid["primary"]["a_level"]["above"] is True
    assert grid["college"]["a_level"] == {"acc": 0.75, "n": 4, "above": False}


def test_deltas_against_identity():
    recs = identity_records()
    # injection: every role wrong on A-level, right on elementary
    for role in ROLES:
        for i in range(4):
            recs.append(rec("injection", role, "elementary", True, i))
            recs.append(rec("injection", role, "a_level", False, i))
    m = cm.compute(recs, ["identity", "injection"])
    inj = m["by_strategy"]["injection"]["macro"]
    # A: kindergarten 4/8 (its elementary questions are above-role too), primary 0/4
    assert inj["A"]["mean"] == pytest.approx((0.5 + 0.0) / 2)
    # IA: primary 4/4, college 4/8
    assert inj["IA"]["mean"] == pytest.approx((1.0 + 0.5) / 2)
    d = m["deltas"]["injection"]
    assert d["A"] == pytest.approx(0.25 - 0.5)
    assert d["IA"] == pytest.approx(0.75 - 0.8125)
    assert "identity" not in m["deltas"]


def test_outcome_kinds_are_counted_and_failed_calls_left_out():
    recs = [rec("identity", "primary", "elementary", True, 0),
            rec("identity", "primary", "elementary", False, 1, response="The answer is A."),
            rec("identity", "primary", "elementary", False, 2, response="\\boxed{A} then \\boxed{"),
            rec("identity", "primary", "elementary", False, 3, response="\\boxed{idk}"),
            rec("identity", "primary", "a_level", False, 4, response="\\boxed{(A)}"),
            rec("identity", "primary", "a_level", False, 5, error="HTTP 500")]
    m = cm.compute(recs, ["identity"])
    oc = m["by_strategy"]["identity"]["outcomes"]
    assert oc == {"valid": 1, "missing": 1, "unclosed": 1, "idk": 1, "other": 1, "total": 5}
    assert m["failed_calls"] == 1
    assert m["by_strategy"]["identity"]["per_role"]["primary"]["TA"] == pytest.approx(1 / 5)


def test_no_role_baseline():
    recs = [rec("no-role", None, "elementary", True, 0), rec("no-role", None, "elementary", False, 1),
            rec("no-role", None, "a_level", True, 2)]
    m = cm.compute(recs, ["no-role"])
    assert m["no_role"]["TA"] == pytest.approx(2 / 3)
    assert m["no_role"]["by_level"] == {"elementary": 0.5, "a_level": 1.0}
    assert m["by_strategy"] == {}


def test_judge_scores_are_averaged_per_role_then_across_roles():
    recs = identity_records()
    answers = [r for r in recs if r.meta["role"] in ("kindergarten", "primary") and r.meta["level"] == "elementary"]
    for k, a in enumerate(answers):
        parsed = {"RV": 2, "C": 0, "RC": 1} if a.meta["role"] == "kindergarten" else {"RV": 1, "C": None, "RC": 2}
        recs.append(Record(call_id=a.call_id.replace("answer", "judge"), item_id=a.item_id, suite="capability",
                           strategy="identity", stage="judge", role="judge", response="...", parsed=parsed,
                           meta={**a.meta, "judged": a.call_id}))
    recs.append(Record(call_id="x/identity/judge.college", item_id="x", suite="capability", strategy="identity",
                       stage="judge.college", role="judge", response="no idea", parsed="invalid",
                       meta={"judged": "nothing"}))
    m = cm.compute(recs, ["identity"])["by_strategy"]["identity"]
    assert m["per_role"]["kindergarten"]["RV"] == 2.0 and m["per_role"]["primary"]["RV"] == 1.0
    assert m["per_role"]["primary"]["C"] is None and m["per_role"]["college"]["RV"] is None
    assert m["macro"]["RV"]["mean"] == pytest.approx(1.5) and m["macro"]["RV"]["n_roles"] == 2
    assert m["macro"]["C"]["mean"] == 0.0 and m["macro"]["C"]["n_roles"] == 1
    assert m["judged"] == 8 and m["judge_invalid"] == 1


def test_fmt_matches_table_3_style():
    assert fmt_mean_sd(0.8844, 0.0091) == "0.884 (0.009)"
    assert fmt_mean_sd(None) == "-"


def test_macro_ci_brackets_the_macro_mean_and_narrows_with_more_questions():
    small = cm.compute(identity_records(), ["identity"])["by_strategy"]["identity"]["macro"]
    for k in ("TA", "IA", "A"):
        assert small[k]["lo"] <= small[k]["mean"] <= small[k]["hi"]
    # the same per-role accuracies on four times the questions: a narrower interval
    big = []
    for copy in range(4):
        for r in identity_records():
            big.append(r.model_copy(update={"item_id": f"{r.item_id}-{copy}", "call_id": f"{r.call_id}-{copy}"}))
    wide = cm.compute(big, ["identity"])["by_strategy"]["identity"]["macro"]
    assert wide["TA"]["mean"] == pytest.approx(small["TA"]["mean"])
    assert wide["TA"]["hi"] - wide["TA"]["lo"] < small["TA"]["hi"] - small["TA"]["lo"]
    # a role that is always right and one always wrong: the macro CI of TA is exactly 0.5
    flat = [rec("identity", "primary", "elementary", True, i) for i in range(5)] + \
           [rec("identity", "college", "elementary", False, i) for i in range(5)]
    ta = cm.compute(flat, ["identity"])["by_strategy"]["identity"]["macro"]["TA"]
    assert (ta["lo"], ta["mean"], ta["hi"]) == (0.5, 0.5, 0.5)


def test_variant_against_identity_is_paired_and_clustered_by_question():
    """Issue 51: ΔTA/ΔIA/ΔA on the same (question, role) answers, the CI resampling questions."""
    from rolebound.suites.capability.suite import CapabilitySuite

    # injection: every answer of the college role flips to wrong, the others as identity
    inj = [rec("injection", r.meta["role"], r.meta["level"], bool(r.correct) and r.meta["role"] != "college",
               int(r.item_id[-1])) for r in identity_records()]
    m = cm.compute(identity_records() + inj, ["identity", "injection"], CapabilitySuite.clusters)
    d = m["deltas_paired"]["injection"]
    assert d["TA"]["n"] == 24 and d["TA"]["diff"] == pytest.approx(-100 * 5 / 24)
    assert (d["TA"]["a_only"], d["TA"]["b_only"]) == (5, 0) and d["TA"]["p"] == pytest.approx(1 / 16)
    assert d["TA"]["clusters"] == 8           # the 8 questions, each asked under the 3 roles
    assert d["A"]["diff"] == 0.0                # college has no question above its ceiling
    pooled = m["by_strategy"]["identity"]["ta_pooled"]
    assert pooled["n"] == 24 and pooled["clusters"] == 8 and pooled["rate"] == pytest.approx(100 * 15 / 24)
