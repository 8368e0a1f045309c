"""Position bias of multiple-choice answers and answers under shifted option orders
(rolebound.stats, rolebound.scoring.order), on hand-made records."""

from __future__ import annotations

import pytest

from rolebound import stats
from rolebound.records import Record
from rolebound.scoring import order

LABELS = ["1", "2", "3", "4", "5"]


def rec(i: int, parsed, gold, stage="bc", **meta) -> Record:
    return Record(call_id=f"q{i:03d}/independent/{stage}", item_id=f"q{i:03d}", suite="t", strategy="independent",
                  stage=stage, parsed=parsed, gold=gold, correct=parsed == gold,
                  meta={"mc": stage.split("~")[0], "labels": LABELS, **meta})


def test_picks_on_one_position_that_rarely_holds_gold_warn():
    # gold spread evenly over five positions; 70% of the picks on option 1
    recs = [rec(i, 1 if i % 10 < 7 else 2, i % 5 + 1) for i in range(100)]
    out = stats.position_bias(recs)
    b = out["stages"]["bc"]
    assert b["pick_share"][0] == pytest.approx(70.0) and b["gold_share"][0] == pytest.approx(20.0)
    assert b["follows_position"]["label"] == "1"
    assert b["p"] < 1e-6 and b["dof"] == 4
    assert len(out["warnings"]) == 1 and "70% of the answers are option 1" in out["warnings"][0]


def test_picks_that_follow_the_gold_do_not_warn():
    # a model that is right 90% of the time: picks follow the gold wherever it stands
    recs = [rec(i, i % 5 + 1 if i % 10 else 3, i % 5 + 1) for i in range(100)]
    out = stats.position_bias(recs)
    assert out["warnings"] == [] and out["stages"]["bc"]["p"] > 0.05
    # most picks at a position that holds most of the gold: no warning either
    recs = [rec(i, 1, 1 if i % 10 < 6 else 2) for i in range(50)]
    assert stats.position_bias(recs)["warnings"] == []


def test_invalid_answers_shifted_calls_and_other_roles_are_left_out():
    recs = [rec(i, "invalid", 1) for i in range(5)] + [rec(10 + i, 2, 2) for i in range(5)]
    recs.append(rec(50, 1, 1, stage="bc~s1", shift=1))
    recs.append(rec(51, 1, 1, control="kv-order"))
    judge = rec(52, 1, 1)
    judge.role = "judge"
    recs.append(judge)
    b = stats.position_bias(recs)["stages"]["bc"]
    assert b["n"] == 10 and b["invalid"] == 5 and b["answered"] == 5 and b["with_gold"] == 10
    assert stats.position_bias([r for r in recs if r.meta.get("shift")])["stages"] == {}


def test_letters_and_records_without_labels():
    r1 = Record(call_id="a", item_id="a", suite="t", strategy="s", stage="answer", parsed="C", gold="A",
                meta={"mc": "canon", "labels": list("ABCD")})
    r2 = Record(call_id="b", item_id="b", suite="t", strategy="s", stage="answer", parsed="C", gold="B", meta={})
    b = stats.position_bias([r1, r2])["stages"]["canon"]
    assert b["picks"] == [0, 0, 1, 0] and b["golds"] == [1, 0, 0, 0]


def test_orders():
    assert order.cyclic(4, 1) == [3, 0, 1, 2]          # option 0 is shown at position 1
    assert order.apply(list("abcd"), order.cyclic(4, 1)) == list("dabc")
    assert order.shown_position(order.cyclic(4, 1), 0) == 1
    p = order.moved("k", 5, [0, 2], target=0)
    assert sorted(p) == list(range(5)) and order.shown_position(p, 0) not in (0, 2)
    assert order.moved("k", 5, [0, 2], target=0) == p          # fixed by its key
    assert order.shown_position(order.moved("k", 2, [1], target=1), 1) == 0


def shifted(i: int, shift: int, chosen_index: int | None, gold_index: int) -> Record:
    """An item with 4 options asked under cyclic shift `shift`; the model chose paper-order option
    `chosen_index` (None: invalid)."""
    sh = order.cyclic(4, shift)
    labels = list("ABCD")
    parsed = "invalid" if chosen_index is None else labels[order.shown_position(sh, chosen_index)]
    gold = labels[order.shown_position(sh, gold_index)]
    stage = "answer" if not shift else f"answer~s{shift}"
    meta = {"mc": "canon", "labels": labels, **({"shift": shift, "order": sh} if shift else {})}
    return Record(call_id=f"i{i}/direct/{stage}", item_id=f"i{i}", suite="t", strategy="direct", stage=stage,
                  parsed=parsed, gold=gold, correct=parsed == gold, meta=meta)


def test_shifts_accuracy_and_consistency_by_content():
    recs = []
    for i in range(10):
        for s in range(3):
            if i < 6:                       # content follower: always the right option (index 2)
                recs.append(shifted(i, s, 2, 2))
            else:                           # position follower: always label A
                sh = order.cyclic(4, s)
                recs.append(shifted(i, s, sh[0], 2))
    out = stats.shifted_orders(recs)["canon"]
    assert out["shifts"] == 3 and out["items"] == 10
    assert out["consistency"]["rate"] == pytest.approx(60.0)
    assert out["accuracy"]["0"]["rate"] == pytest.approx(60.0)   # A is never gold at shift 0 (gold index 2 = C)
    assert out["accuracy"]["2"]["rate"] == pytest.approx(100.0)  # at shift 2 gold index 2 is shown as A
    assert stats.shifted_orders([shifted(0, 0, 1, 1)]) == {}             # nothing shifted: no section


def test_a_small_sample_that_the_test_cannot_tell_from_chance_does_not_warn():
    recs = [rec(i, 1 if i < 3 else 2, [1, 2, 3, 4, 5][i % 5]) for i in range(5)]   # 60% at 1, gold 20% there
    b = stats.position_bias(recs)["stages"]["bc"]
    assert b["pick_share"][0] == 60.0 and b["p"] > 0.05 and b["follows_position"] is None


@pytest.mark.parametrize("seed", range(6))
def test_chi_square_equals_scipys_contingency_test(seed):
    # computed without scipy.stats (a second of import in every report); must give its figures,
    # Yates' correction on 2 x 2 included, and drop the positions empty in both rows
    import numpy as np
    from scipy.stats import chi2_contingency

    rng = np.random.default_rng(seed)
    k = 2 + seed % 4
    picks, golds = list(rng.integers(0, 30, k)), list(rng.integers(1, 30, k))
    if seed == 5:
        picks[0] = golds[0] = 0
    got = stats.chi_square(picks, golds)
    cols = [i for i in range(k) if picks[i] + golds[i]]
    chi2, p, dof, _ = chi2_contingency([[picks[i] for i in cols], [golds[i] for i in cols]])
    assert got["dof"] == dof and got["chi2"] == pytest.approx(chi2, rel=1e-9) and got["p"] == pytest.approx(p, rel=1e-9)


def test_chi2_sf_equals_scipys_survival_function():
    # the closed form that replaced scipy.special.chdtrc, over the degrees of freedom a report meets
    from scipy.special import chdtrc

    for dof in range(1, 16):
        for x in [0.0, 1e-6, 0.05, 0.5, 1, 2.7, 5, 9.49, 14, 30, 80, 200, 700]:
            want = float(chdtrc(dof, x))
            assert stats.chi2_sf(x, dof) == pytest.approx(want, rel=1e-9, abs=1e-300), (dof, x)
