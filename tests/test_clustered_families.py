"""Issue 51 item 1 beyond the headline figures: every suite's secondary CIs and paired differences
resample the unit its design repeats. Each family is given clusters whose copies answer alike, so
that the item-level interval is too narrow; the clustered one must be wider and count the clusters.
Also: no MDD at a rate of 0% or 100%, chart error bars only where a CI is printed, and data text
drawn literally in figures."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rolebound.records import Record
from rolebound.stats import rate_ci

K, M = 12, 5            # 12 clusters of 5 copies that answer alike


def width(d: dict) -> float:
    return d["hi"] - d["lo"]


def wider(clustered: dict, item: dict, factor: float = 1.5) -> None:
    """The clustered interval is well wider than the item-level one on the same outcomes."""
    assert width(clustered) >= factor * width(item) > 0, (clustered, item)


# -- multiverse ------------------------------------------------------------------------------------
def mv(item, strategy, stage, parsed, gold, **meta) -> Record:
    task = meta.pop("task", "dilemma")
    correct = None if gold is None else parsed == gold
    return Record(call_id=f"{item}/{strategy}/{stage}", item_id=item, suite="multiverse", strategy=strategy,
                  stage=stage, parsed=parsed, gold=gold, correct=correct,
                  meta={"task": task, "letters": "AB" if task == "dilemma" else "ABCD", **meta})


def dilemmas(strategy="direct", stage="answer", flip=lambda c: False):
    """K versions of one conflict type (a cluster each: version+conflict), M iterations each,
    every iteration of a version choosing alike (A where c is odd, unless flip(c))."""
    out = []
    for c in range(K):
        pick = "A" if (c % 2) != flip(c) else "B"
        for j in range(M):
            out.append(mv(f"v{c}/d{j}", strategy, stage, pick, "A", version=f"v{c}", played=f"v{c}",
                          hero=f"h{c}", conflict="duty-vs-desire", iteration=j))
    return out


def test_multiverse_shares_f1_and_paired_differences_resample_clusters():
    from rolebound.suites.multiverse.metrics import CONFLICTS, accuracy_block, cot_minus_direct, f1_ci
    from rolebound.suites.multiverse.suite import MultiverseSuite

    spec = MultiverseSuite.clusters
    recs = dilemmas()
    b = accuracy_block(recs, "conflict", CONFLICTS, spec)
    item = rate_ci([r.parsed == "A" for r in recs])
    for d in (b["choice_share"]["A"], b["first_pole_share"]["duty-vs-desire"], b["by_conflict"]["duty-vs-desire"]):
        assert d["clusters"] == K
        wider(d, item)
    gold, pred = [r.gold for r in recs], [r.parsed for r in recs]
    lo, hi = f1_ci(gold, pred, "AB")
    assert b["f1_clusters"] == K and b["macro_f1_ci"][1] - b["macro_f1_ci"][0] >= 1.5 * (hi - lo)
    # canon hero parts: a hero is one cluster
    canon = [mv(f"h{c}/q{j}", "direct", "answer", "A" if c % 2 else "B", "A", task="canon", hero=f"h{c}",
                version=f"h{c}", phase="hero", part=1) for c in range(K) for j in range(M)]
    part = accuracy_block(canon, "phase", ["hero"], spec)["by_part"]["hero1"]
    assert part["clusters"] == K
    wider(part, rate_ci([bool(r.correct) for r in canon]))
    # CoT - direct, paired: every cluster's iterations change together
    both = dilemmas() + dilemmas("cot", flip=lambda c: c % 4 == 0)
    d = cot_minus_direct(both, "dilemma", spec)["acc"]
    flat = cot_minus_direct(both, "dilemma", None)["acc"]        # each item its own cluster
    assert d["clusters"] == K and flat["clusters"] == K * M and d["diff"] == flat["diff"]
    wider(d, flat)


def test_multiverse_cross_version_figures_resample_clusters():
    from rolebound.suites.multiverse.metrics import cross_block
    from rolebound.suites.multiverse.suite import MultiverseSuite

    own = dilemmas()
    cross = []
    for r in dilemmas("cross-direct", flip=lambda c: c % 3 == 0):
        c = int(r.meta["version"][1:])
        played = f"v{(c + 1) % K}"
        cross.append(r.model_copy(update={"stage": f"as.{r.meta['version']}", "call_id": r.call_id + ".x",
                                          "meta": {**r.meta, "played": played, "gold_own": "B"}}))
    b = cross_block(own + cross, "cross-direct", "dilemma", MultiverseSuite.clusters)
    flat = cross_block(own + cross, "cross-direct", "dilemma", None)
    for key in ("in_version", "cross_same_items"):
        assert b[key]["clusters"] == K
        wider(b[key], flat[key])
    assert b["drop"]["clusters"] == K and flat["drop"]["clusters"] == K * M
    wider(b["drop"], flat["drop"])
    for key in ("asked_version", "played_version"):
        assert b["differs"][key]["clusters"] == K
        wider(b["differs"][key], rate_ci([r.parsed == r.gold for r in cross]))


# -- CHARM -----------------------------------------------------------------------------------------
def charm(item, stage, correct, parsed, **meta) -> Record:
    return Record(call_id=f"{item}/independent/{stage}", item_id=item, suite="charm", strategy="independent",
                  stage=stage, correct=correct, parsed=parsed, meta=meta)


def test_charm_override_control_and_similarity_resample_targets():
    from rolebound.suites.charm.metrics import override_control, similarity
    from rolebound.suites.charm.suite import CharmSuite

    spec = CharmSuite.clusters
    inst, recs = [], []
    for c in range(K):             # K targets, M facts each: a target's answers alike
        for j in range(M):
            kv_id = f"kv/t{c}/f{j}"
            ok = c % 2 == 0
            inst.append({"bc_id": f"bc/t{c}/f{j}", "boundary": "cross", "ba": True, "fc_bc": True, "kv": ok,
                         "kv_id": kv_id, "cluster": f"boundary=cross||target=t{c}"})
            recs.append(charm(kv_id, "kv", ok, "1" if ok else "2"))
            recs.append(charm(kv_id, "kv~ctl", c % 3 == 0, "1" if c % 3 == 0 else "2"))
    ctl = override_control(recs, inst)
    item = rate_ci([i["kv"] for i in inst])
    assert ctl["paper_order"]["clusters"] == K
    wider(ctl["paper_order"], item)
    assert ctl["paired"]["clusters"] == K and ctl["same_position"]["clusters"] == K
    # Table 14: the most similar fifth is 3 targets' questions: 3 clusters, so no CI is printed
    bc = [charm(f"bc/t{c}/q{j}", "bc", c % 2 == 0, "1", boundary="temporal", target=f"t{c}", sim=c + j / 10)
          for c in range(K) for j in range(M)]
    sim = similarity(bc, clusters=spec)["bc"]
    assert sim["k"] == K and sim["high"]["clusters"] == 3 and sim["high"]["trusted"] is False
    from rolebound.report.fmt import fmt_rate

    assert "no CI: 3 clusters" in fmt_rate(sim["high"])


# -- mcq -------------------------------------------------------------------------------------------
def test_mcq_groups_resample_items_whose_repeats_agree():
    from rolebound.suites.mcq.metrics import compute

    recs = [Record(call_id=f"q{c}/direct/answer/r{j}", item_id=f"q{c}", suite="mcq", strategy="direct",
                   stage="answer", repeat=j, correct=c % 2 == 0, parsed="A", meta={"group": "g"})
            for c in range(K) for j in range(M)]
    g = compute(recs, ["direct"], {})["by_strategy"]["direct"]["by_group"]["g"]
    assert g["n"] == K * M and g["clusters"] == K
    wider(g, rate_ci([bool(r.correct) for r in recs]))


# -- dialogue --------------------------------------------------------------------------------------
def test_dialogue_rates_changes_and_drift_resample_the_character():
    from rolebound.dialogue import metrics as dm
    from rolebound.suites.base import DIALOGUE

    def probe(c, j, depth, correct):
        return Record(call_id=f"r{c}/q{j}/{DIALOGUE}/ba@{depth}", item_id=f"r{c}/q{j}", suite="charm",
                      strategy=DIALOGUE, stage=f"ba@{depth}", correct=correct, parsed="No",
                      meta={"depth": depth, "warmup": "scripted" if depth else None, "role": f"r{c}"})

    # every probe of a role follows its one conversation: its answers move together
    recs = [probe(c, j, d, (c % 2 == 0) if d == 0 else (c % 3 == 0)) for c in range(K) for j in range(M)
            for d in (0, 4)]
    values = lambda rs: {"BA": {r.item_id: bool(r.correct) for r in rs}}      # noqa: E731
    roles = lambda rs: {r.item_id: r.meta["role"] for r in rs}                # noqa: E731
    got = dm.compute(recs, values, ["BA"], roles, "role")
    flat = dm.compute(recs, values, ["BA"])
    s, f = got["metrics"]["BA"]["scripted"], flat["metrics"]["BA"]["scripted"]
    assert got["cluster_by"] == "role" and flat["cluster_by"] == "item"
    for row, frow in zip(s["rows"], f["rows"]):
        assert row["clusters"] == K and frow["clusters"] == K * M
        wider(row, frow)
    change, fchange = s["rows"][1]["change"], f["rows"][1]["change"]
    assert change["clusters"] == K and change["diff"] == fchange["diff"]
    wider(change, fchange)
    assert s["drift"]["clusters"] == K and s["drift"]["slope"] == pytest.approx(f["drift"]["slope"])
    wider(s["drift"], f["drift"])
    # each suite names its probes' character
    from rolebound.suites.charm.metrics import dialogue_clusters

    assert dialogue_clusters([recs[0]]) == {"r0/q0": "role=r0"}


# -- shifted option orders (the position figures) ---------------------------------------------------
def test_shifted_orders_resample_the_declared_cluster():
    from rolebound.stats import shifted_orders

    recs = []
    for c in range(K):
        for j in range(M):
            for shift in (0, 1):
                ok = c % 2 == 0
                stage = "answer" if not shift else "answer~s1"
                meta = {"mc": "canon", "labels": list("ABCD"), "hero": f"h{c}",
                        **({"shift": 1, "order": [3, 0, 1, 2]} if shift else {})}
                recs.append(Record(call_id=f"h{c}/q{j}/direct/{stage}", item_id=f"h{c}/q{j}", suite="t",
                                   strategy="direct", stage=stage, parsed="A" if ok else "B", gold="A", correct=ok,
                                   meta=meta))
    got = shifted_orders(recs, {"*": ("hero",)})["canon"]
    flat = shifted_orders(recs)["canon"]
    assert got["accuracy"]["0"]["clusters"] == K and flat["accuracy"]["0"]["clusters"] == K * M
    wider(got["accuracy"]["0"], flat["accuracy"]["0"])


# -- what a 0% or 100% rate can detect ------------------------------------------------------------
def test_the_headline_table_gives_no_mdd_at_0_or_100_percent():
    from rolebound.report import headline_rows

    suite = SimpleNamespace(headline=(("all right", "a", "answer"), ("half", "b", "answer")), clusters={})
    n = 40
    metrics = {"a": rate_ci([True] * n, [str(i) for i in range(n)]),
               "b": rate_ci([i % 2 == 0 for i in range(n)], [str(i) for i in range(n)])}
    manifest = SimpleNamespace(limit=n, n_items=n, dataset_items=4 * n)
    full, half = headline_rows(suite, metrics, manifest)
    assert full[6] == "- (rate at 0%/100%)" and full[7] == full[8] == "- (undefined at 0%/100%)"
    assert "0.0" not in full[6:]
    assert half[7] == f"{metrics['b']['mdd']:.1f}" and float(half[7]) > 0


# -- the card's chart ------------------------------------------------------------------------------
def test_the_card_chart_draws_a_bar_only_where_a_ci_is_printed():
    from rolebound.card.chart import draw
    from rolebound.report.fmt import chart, rate

    full = rate("a", "a", rate_ci([True] * 30, [str(i) for i in range(30)]))          # 100%: exact CI
    few = rate("b", "b", rate_ci([i % 2 == 0 for i in range(30)], [str(i % 4) for i in range(30)]))
    ok = rate("c", "c", rate_ci([i % 2 == 0 for i in range(30)], [str(i) for i in range(30)]))
    spec = chart("t", ["a", "b", "c"], {"run": [full, few, ok]})
    bars = spec["series"][0]["bars"]
    assert bars[0]["lo"] < bars[0]["hi"] == 100.0          # visible: from 100 down to the exact bound
    assert bars[1]["lo"] is None                           # 4 clusters: no interval, no bar
    assert bars[2]["lo"] < bars[2]["hi"]
    fig = draw(spec)
    drawn = [c for c in fig.axes[0].containers if getattr(c, "errorbar", None) is not None]
    assert len(drawn) == 2          # a, c: one error bar each; b none
    zero = chart("t", ["z"], {"run": [dict(ok, lo=50.0, hi=50.0, clusters=None, n=30)]})
    assert not [c for c in draw(zero).axes[0].containers if getattr(c, "errorbar", None) is not None]


# -- data text in figures --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bad$x_$name", "a$b_c$d", "m\x1b[31m"])
def test_a_model_name_is_drawn_as_typed_in_charm_figures(name):
    from figtext import drawn_texts

    from rolebound.suites.charm.report import _region_bars, _stacked

    mat = {c: {"rate": 25.0} for c in ("consistent", "compliance_gap", "incidental_refusal", "recognition_failure")}
    region = {"EN": {"c_gap": rate_ci([True, False] * 10), "override": rate_ci([True] * 4)}}
    for fig in (_stacked(["all"], [mat], f"{name}: matrix cells by boundary type"), _region_bars(region, name)):
        texts, _ = drawn_texts(fig)             # a mathtext reading of '$x_$' would raise here
        title = next(t for t, _, _ in texts if "matrix cells" in t or "cluster-bootstrap" in t)
        assert "\x1b" not in title
        assert name.replace("\x1b", "\\x1b") in title


def test_the_shift_table_names_its_clusters():
    from rolebound.report import shift_sections
    from rolebound.report.builder import Report
    from rolebound.stats import shifted_orders

    recs = [Record(call_id=f"h{c}/q{j}/direct/{'answer' if not s else 'answer~s1'}", item_id=f"h{c}/q{j}", suite="t",
                   strategy="direct", stage="answer" if not s else "answer~s1", parsed="A", gold="A", correct=True,
                   meta={"mc": "canon", "labels": list("ABCD"), "hero": f"h{c}",
                         **({"shift": 1, "order": [3, 0, 1, 2]} if s else {})})
            for c in range(K) for j in range(2) for s in (0, 1)]
    rep = Report("t")
    shift_sections(rep, {"shifts": shifted_orders(recs, {"*": ("hero",)})})
    (table,) = [s.body for s in rep.sections if s.kind == "table"]
    row = dict(zip(table["columns"], table["rows"][0]))
    assert row["clustered by"] == "hero" and row["clusters"] == str(K)
