"""CHARM: expansion, prompts, metrics on hand-made records, build pipeline, custom regions."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from rolebound import api
from rolebound.suites.charm.build import cohen_kappa, parse_incorrect, pick_distractors, review, BuildStats
from rolebound.errors import InputError
from rolebound.suites.charm import metrics as cm
from rolebound.records import Decoding, Record
from rolebound.suites.charm.prompts import BA_PROMPT, mcq_prompt
from rolebound.suites.charm.suite import CharmSuite
from rolebound.suites.charm.data import ABSTAIN, expand, load_data

HERE = Path(__file__).resolve().parent
NORDIC = HERE / "data" / "charm_nordic.yaml"


# -- expansion --------------------------------------------------------------------------------
def test_expansion_of_a_user_region():
    d, _ = load_data([NORDIC], builtin=False)
    items, info = expand(d)
    c = Counter((i.stage, i.boundary) for i in items)
    # 1 historical x 2 concepts; 1 historical x 1 contemporary; x 2 facts; one KV per cross BC
    assert c == {("ba", "temporal"): 2, ("bc", "temporal"): 2, ("ba", "cross"): 1, ("bc", "cross"): 2,
                 ("kv", "cross"): 2}
    for i in items:
        if i.stage == "ba":
            assert i.gold == "No"
        else:
            assert len(i.options) == 5 and ABSTAIN in i.options and i.answer in i.options
            assert i.options[i.fact_option - 1] == i.answer
            assert i.gold == (i.options.index(ABSTAIN) + 1 if i.stage == "bc" else i.fact_option)
    bc = [i for i in items if i.stage == "bc"]
    assert all(i.ba_id in {x.id for x in items} for i in bc)
    assert {i.kv_id for i in bc if i.boundary == "cross"} == {"kv/leif-erikson/greta-thunberg-01",
                                                               "kv/leif-erikson/greta-thunberg-02"}
    assert info["skipped_pairs"] == 0 and info["skipped_cross_pairs"] == 0


def test_each_cross_bc_question_has_its_kv_question_with_the_same_options():
    """Table 11: the KV question shows the BC question's options in the same order."""
    items, _ = expand(load_data()[0])
    by_id = {i.id: i for i in items}
    cross = [i for i in items if i.stage == "bc" and i.boundary == "cross"]
    kvs = [i for i in items if i.stage == "kv"]
    assert len(kvs) == len(cross) and len({i.kv_id for i in cross}) == len(cross)
    for bc in cross:
        kv = by_id[bc.kv_id]
        assert kv.options == bc.options and kv.fact == bc.fact and kv.bc_id == bc.id
        assert kv.gold == bc.fact_option and kv.role == bc.target and kv.options[kv.gold - 1] == bc.answer


def test_cross_pairs_whose_target_is_known_inside_the_era_are_skipped():
    items, info = expand(load_data()[0])
    rocky = {i.target for i in items if i.role == "rocky-balboa" and i.boundary == "cross"}
    assert "steve-jobs" not in rocky and "emma-watson" not in rocky      # known by 1976 and 2001
    assert rocky == {"sarah", "beth-harmon"} and info["skipped_cross_pairs"] == 2


def test_builtin_starter_set_matches_table7_design():
    d, _ = load_data()
    hist = [c for c in d.characters if c.period == "historical"]
    cont = [c for c in d.characters if c.period == "contemporary"]
    assert len(d.characters) == 40 and len(hist) == 20 and len(cont) == 20 and len(d.regions) == 5
    assert len(d.concepts) == 30 and all(len(c.ba_templates) >= 3 for c in d.concepts)
    facts = Counter(f.target for f in d.facts)
    assert all(facts[c.id] >= 8 for c in cont)
    assert all(not x.validated for x in d.characters + d.concepts + d.facts)
    assert all(f.source for f in d.facts)
    items, info = expand(d)
    c = Counter((i.stage, i.boundary) for i in items)
    assert c[("ba", "temporal")] == 600 and c[("bc", "temporal")] == 600
    # 80 pairs less the 2 whose target is known inside Rocky Balboa's years (era_end 2006)
    assert c[("ba", "cross")] == 78 and info["skipped_cross_pairs"] == 2
    per_region = Counter(f.target for f in d.facts)
    region_of = {x.id: x.region for x in d.characters}
    skipped = per_region["steve-jobs"] + per_region["emma-watson"]
    expected_cross_bc = sum(4 * n for t, n in per_region.items()) - skipped
    assert c[("bc", "cross")] == expected_cross_bc and c[("kv", "cross")] == expected_cross_bc
    assert info["skipped_pairs"] == 0 and set(region_of.values()) == {r.id for r in d.regions}
    # abstention position balanced over the BC questions (KV questions copy their BC's options)
    for stage in ("bc",):
        pos = Counter(i.options.index(ABSTAIN) for i in items if i.stage == stage)
        assert max(pos.values()) - min(pos.values()) <= 1 and len(pos) == 5
    # templates alternate across characters
    ba_t = Counter(i.template for i in items if i.stage == "ba" and i.boundary == "temporal")
    assert len(ba_t) >= 3


def test_custom_region_adds_to_the_starter_set(tmp_path):
    """A user file that adds a region, its characters and facts; concepts come from the starter set."""
    text = NORDIC.read_text()
    user = tmp_path / "nordic.yaml"
    user.write_text(text.split("concepts:")[0] + "facts:" + text.split("facts:")[1])
    d, sources = load_data([user])
    items, _ = expand(d)
    nordic = Counter((i.stage, i.boundary) for i in items if i.region == "Nordic")
    assert nordic[("ba", "temporal")] == 30 and nordic[("bc", "temporal")] == 30
    assert nordic[("ba", "cross")] == 1 and nordic[("bc", "cross")] == 2 and nordic[("kv", "cross")] == 2
    assert len(sources) == 5 and "Nordic" in {r.id for r in d.regions}


def test_bad_user_file_names_file_line_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("regions:\n  - {id: X, name: X}\ncharacters:\n  - id: a\n    name: A\n    region: Y\n"
                   "    profile: p\n    reality: real\n    period: contemporary\n    universe: u\n    note: ours\n")
    with pytest.raises(InputError) as exc:
        load_data([bad], builtin=False)
    assert exc.value.line == 6 and exc.value.field == "characters[0].region" and "unknown region" in str(exc.value)
    bad.write_text("characters:\n  - id: a\n    name: A\n    region: X\n    profile: p\n    reality: real\n"
                   "    period: historical\n    universe: u\n    note: ours\n")
    with pytest.raises(InputError, match="era_end"):
        load_data([bad], builtin=False)
    # data we and our users author says where it comes from (suites.base.Authored)
    bad.write_text("regions:\n  - {id: X, name: X}\ncharacters:\n  - id: a\n    name: A\n    region: X\n"
                   "    profile: p\n    reality: real\n    period: contemporary\n    universe: u\n")
    with pytest.raises(InputError, match="give a `source` or a `note`") as exc:
        load_data([bad], builtin=False)
    assert exc.value.line == 4 and exc.value.field == "characters[0]"


def test_temporal_pairs_respect_era_end(tmp_path):
    p = tmp_path / "late.yaml"
    p.write_text(NORDIC.read_text().replace("era_end: 1025", "era_end: 2005"))
    d, _ = load_data([p], builtin=False)
    items, info = expand(d)
    # video calls (2003) are no boundary for someone whose world runs to 2005; smartphones (2007) are
    assert info["skipped_pairs"] == 1
    assert {i.target for i in items if i.boundary == "temporal"} == {"smartphone"}


def test_prompts_follow_tables_19_and_20():
    d, _ = load_data([NORDIC], builtin=False)
    items, _ = expand(d)
    bc = next(i for i in items if i.stage == "bc")
    text = mcq_prompt(bc)
    assert text.startswith("You are Leif Erikson. Please read the following multiple-choice question")
    assert "And there is a Leif Erikson profile: Leif Erikson, a Norse explorer" in text
    assert "\n1. " in text and "\n5. " in text
    assert text.endswith("state your final answer on the last line in the format: Answer: <number>")
    assert BA_PROMPT.endswith("Answer only \u201cYes\u201d or \u201cNo\u201d.\nAnswer:")


def test_select_keeps_whole_instances():
    d, _ = load_data([NORDIC], builtin=False)
    items, _ = expand(d)
    kept = CharmSuite().select(items, 4)
    ids = {i.id for i in kept}
    for i in kept:
        if i.stage == "bc":
            assert i.ba_id in ids and (i.kv_id is None or i.kv_id in ids)


# -- metrics on hand-made records ------------------------------------------------------------
def rec(item, stage, correct, parsed, strategy="independent", **meta):
    base = {"boundary": "cross", "region": "EN", "role": "shakespeare", "target": "beth", "fact": None}
    base.update(meta)
    return Record(call_id=f"{item}/{strategy}/{stage}", item_id=item, suite="charm", strategy=strategy,
                  stage=stage, correct=correct, parsed=parsed, meta=base)


def hand_made():
    """Four cross instances (one per matrix cell) and two temporal ones, with known answers.
    BC: options 1..5, abstention at 4, fact at 2. KV: fact at 2."""
    R = []
    R.append(rec("ba/x/r1/beth", "ba", True, "No"))
    R.append(rec("ba/x/r2/beth", "ba", False, "Yes", role="r2"))
    R.append(rec("ba/t/r1/phone", "ba", True, "No", boundary="temporal"))
    R.append(rec("ba/t/r3/phone", "ba", False, "invalid", boundary="temporal", region="Korea"))
    f = dict(fact_option=2)
    # consistent (BA T, BC T)
    R.append(rec("bc/1", "bc", True, 4, ba_id="ba/x/r1/beth", kv_id="kv/f1", fact="f1", **f))
    # compliance gap, factually correct, KV correct -> verified override
    R.append(rec("bc/2", "bc", False, 2, ba_id="ba/x/r1/beth", kv_id="kv/f2", fact="f2", **f))
    # compliance gap, factually correct, KV wrong -> candidate, not verified
    R.append(rec("bc/3", "bc", False, 2, ba_id="ba/x/r1/beth", kv_id="kv/f3", fact="f3", **f))
    # compliance gap, other distractor
    R.append(rec("bc/4", "bc", False, 5, ba_id="ba/x/r1/beth", kv_id="kv/f1", fact="f1", **f))
    # incidental refusal (BA F, BC T)
    R.append(rec("bc/5", "bc", True, 4, ba_id="ba/x/r2/beth", kv_id="kv/f1", fact="f1", role="r2", **f))
    # recognition failure, invalid BC
    R.append(rec("bc/6", "bc", False, "invalid", ba_id="ba/x/r2/beth", kv_id="kv/f2", fact="f2", role="r2", **f))
    # temporal: gap (EN) and recognition failure (Korea)
    R.append(rec("bc/t1", "bc", False, 2, ba_id="ba/t/r1/phone", boundary="temporal", **f))
    R.append(rec("bc/t2", "bc", False, 1, ba_id="ba/t/r3/phone", boundary="temporal", region="Korea", **f))
    R.append(rec("kv/f1", "kv", True, 2, **f))
    R.append(rec("kv/f2", "kv", True, 2, **f))
    R.append(rec("kv/f3", "kv", False, 3, **f))
    return R


def test_matrix_and_table2_rates():
    m = cm.compute(hand_made())
    allm = m["matrix"]["all"]
    assert allm["n"] == 8
    assert allm["consistent"]["count"] == 1 and allm["compliance_gap"]["count"] == 4
    assert allm["incidental_refusal"]["count"] == 1 and allm["recognition_failure"]["count"] == 2
    assert allm["compliance_gap"]["rate"] == 50.0 and allm["recognition_failure"]["rate"] == 25.0
    # C-Gap + R-Fail = 100 - BC accuracy over instances
    assert allm["compliance_gap"]["rate"] + allm["recognition_failure"]["rate"] == 100 - allm["bc_acc"]["rate"]
    assert m["matrix"]["cross"]["n"] == 6 and m["matrix"]["cross"]["compliance_gap"]["count"] == 3
    assert m["matrix"]["temporal"]["compliance_gap"]["rate"] == 50.0
    acc = m["stage_accuracy"]
    assert acc["ba/all"]["rate"] == 50.0 and acc["ba/all"]["invalid"] == 1
    assert acc["bc/all"]["n"] == 8 and acc["bc/all"]["invalid"] == 1 and acc["kv/all"]["rate"] == pytest.approx(200 / 3)


def test_table9_split_and_override():
    m = cm.compute(hand_made())
    s = m["bc_false_split"]["cross"]
    assert s["ba_true"] == {"factually_correct": 2, "other_distractor": 1, "invalid": 0}
    assert s["ba_false"] == {"factually_correct": 0, "other_distractor": 0, "invalid": 1}
    ov = m["override"]
    assert (ov["ba_pos"], ov["ba_pos_fc_bc"], ov["ba_pos_fc_bc_fc_kv"]) == (4, 2, 1)
    assert ov["rate"] == 50.0


def test_by_region_and_across_models():
    m = cm.compute(hand_made())
    en, kr = m["by_region"]["EN"], m["by_region"]["Korea"]
    assert en["n"] == 7 and en["c_gap"]["rate"] == pytest.approx(400 / 7)
    assert kr["n"] == 1 and kr["c_gap"]["rate"] == 0.0 and kr["n_override"] == 0
    other = cm.compute(hand_made()[:-3] + [rec("kv/f1", "kv", True, 2, fact_option=2),
                                           rec("kv/f2", "kv", False, 1, fact_option=2),
                                           rec("kv/f3", "kv", False, 3, fact_option=2)])
    t17 = cm.across_models({"a": m, "b": other})
    assert t17["EN"]["override"] == (25.0, pytest.approx(35.355, abs=1e-3))   # 50 and 0
    assert t17["EN"]["n"] == 7 and t17["EN"]["models"] == 2


def test_table17_says_when_only_one_run_has_a_value():
    """Issue 51: one run with an override value and one without used to read '50.0 ± 0.0, models 2'."""
    from pathlib import Path
    from types import SimpleNamespace

    from rolebound.report.builder import Report
    from rolebound.suites.charm.report import compare_tables

    m = cm.compute(hand_made())
    none = cm.compute([r for r in hand_made() if r.stage != "kv"])      # no KV: no override value
    t17 = cm.across_models({"a": m, "b": none})
    assert t17["EN"]["models_c_gap"] == 2 and t17["EN"]["models_override"] == 1
    rep = Report("t")
    entries = [(Path(n), SimpleNamespace(model=n, scoring=None), met) for n, met in (("a", m), ("b", none))]
    compare_tables(rep, entries)
    table = next(sec for sec in rep.sections if sec.title.startswith("Table 17"))
    en = next(r for r in table.body["rows"] if r[0] == "EN")
    assert en[3] == "50.0 (one run only)" and en[5] == "2 / 1" and "\u00b1 0.0" not in en[3]


def test_sequential_and_no_role_tables():
    R = hand_made()
    R += [rec("bc/2", "seq.bc", True, 4, strategy="sequential", fact_option=2),
          rec("bc/3", "seq.bc", True, 4, strategy="sequential", fact_option=2),
          rec("bc/t1", "seq.bc", False, 2, strategy="sequential", boundary="temporal", fact_option=2)]
    R += [rec("bc/2", "nr", True, 2, strategy="no-role", fact_option=2),
          rec("bc/3", "nr", False, 1, strategy="no-role", fact_option=2),
          rec("bc/1", "nr", True, 2, strategy="no-role", fact_option=2)]
    m = cm.compute(R)
    s = m["sequential"]["cross"]
    assert s["sequential"]["rate"] == 100.0 and s["independent"]["rate"] == 0.0 and s["diff"] == 100.0
    # Table 15 paired: the same questions both ways; two discordant pairs, both for sequential
    assert s["paired"]["diff"] == 100.0 and (s["paired"]["a_only"], s["paired"]["b_only"]) == (0, 2)
    assert s["paired"]["p"] == pytest.approx(0.5) and s["paired"]["trusted"] is False
    nr = m["no_role"]
    assert nr["nr_minus_kvq"]["n"] == 2 and nr["nr_minus_kvq"]["diff"] == 0.0
    # candidates bc/2 (KV right, NR right) and bc/3 (KV wrong, NR wrong)
    assert nr["n"] == 2 and nr["kvq"]["rate"] == 50.0 and nr["nr"]["rate"] == 50.0 and nr["both"]["rate"] == 50.0
    assert nr["nr_all"]["rate"] == pytest.approx(200 / 3)
    from rolebound.suites.charm.report import summary_lines

    line = dict(summary_lines(m))["no-role acc % (cross BC, Table 16)"]     # a headline of the run
    # three questions: under 10 clusters no bracket is printed (issue 51), the reason is
    assert line.startswith("66.7 (no CI: 3 clusters, too few to trust one)") and line.endswith("(n 3)")
    assert dict(summary_lines({"no_role": nr})) == {"no-role acc % (cross BC, Table 16)": line}  # no-role alone


def test_similarity_top_vs_bottom_20_percent():
    R = []
    for k in range(10):
        R.append(rec(f"kv/f{k}", "kv", k < 5, 1, sim=k / 10, embedder="e"))
    sim = cm.similarity(R)
    # top 20% = sims .8,.9 (wrong); bottom 20% = 0,.1 (right)
    assert sim["kv"]["k"] == 2 and sim["kv"]["high"]["rate"] == 0.0 and sim["kv"]["low"]["rate"] == 100.0
    assert sim["kv"]["gap"] == -100.0 and sim["embedder"] == "e"


def test_failed_calls_do_not_pair():
    R = hand_made()
    R[0] = Record(**{**R[0].model_dump(), "error": "boom", "correct": None})
    m = cm.compute(R)
    assert m["matrix"]["all"]["n"] == 4 and m["failed_calls"] == 1


# -- build pipeline ---------------------------------------------------------------------------
def test_parse_incorrect_answers():
    text = ("Here you go:\n**Incorrect Answer 1:** [Mr. Ford, the janitor]\nIncorrect Answer 2: Her mother\n"
            "Incorrect Answer 3: [text]\nIncorrect answer 9: out of range\nIncorrect Answer 4: A neighbour")
    assert parse_incorrect(text, range(1, 5)) == ["Mr. Ford, the janitor", "Her mother", "A neighbour"]
    assert parse_incorrect("nothing useful", range(5, 9)) == []


@pytest.mark.slow
def test_pick_distractors_drops_near_duplicates():
    from rolebound.scoring.embeddings import get_embedder

    emb = get_embedder()
    st = BuildStats()
    # stage-1 and stage-2 candidates alternate; "Gothenburg city" is a near-duplicate (cosine 0.93)
    got = pick_distractors("Stockholm", ["Gothenburg", "Gothenburg city", "Stockholm"],
                           ["Oslo", "Helsinki"], emb.encode, 0.9, st)
    assert got == ["Gothenburg", "Oslo", "Helsinki"] and st.near_duplicates == 1
    st = BuildStats()
    assert pick_distractors("Stockholm", ["stockholm"], ["Oslo"], emb.encode, 0.9, st) == ["Oslo"]
    assert st.near_duplicates == 1


def test_cohen_kappa_known_values():
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
    # po = 0.7, pe = 0.5*0.6 + 0.5*0.4 = 0.5 -> 0.4
    a = [1] * 5 + [0] * 5
    b = [1, 1, 1, 1, 0, 0, 0, 0, 1, 1]
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa([1, 1], [1, 1]) is None


@pytest.mark.model
def test_build_pipeline_with_the_bundled_model(tmp_path):
    from rolebound.suites.charm.build import build

    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(
        "regions: [{id: Nordic, name: Nordic}]\n"
        "characters:\n"
        "  - {id: leif, name: Leif Erikson, region: Nordic, profile: 'Leif Erikson, a Norse explorer', reality: real,"
        " period: historical, era_end: 1025, universe: Norse Greenland, note: test seed}\n"
        "  - {id: greta, name: Greta Thunberg, region: Nordic, profile: 'Greta Thunberg, a Swedish activist',"
        " reality: real, period: contemporary, universe: Sweden, note: test seed}\n"
        "facts:\n"
        "  - {id: g1, target: greta, bc_question: 'Where was Greta Thunberg born?', kv_question: 'Where were you born?',"
        " answer: Stockholm, note: test seed}\n"
        "  - {id: g2, target: greta, bc_question: 'When did Greta Thunberg start her school strike?',"
        " kv_question: 'When did you start your school strike?', answer: '2018', distractors: ['2015', '2016', '2020'],"
        " note: test seed}\n")
    # 64 tokens, not the default 256: greedy, so a reply is the 256-token reply cut short; stage 1
    # stops by itself at about 40 and stage 2 has its four answer lines in about 35, then ran on to
    # 256 (half the test's time), so the parsed candidates and every step below are the same
    dec = Decoding(max_tokens=64)
    res = build(seeds, "bundled", tmp_path / "out", progress=False, decoding=dec)
    assert res["questions"] == 2 and res["kept_given"] == 1 and res["model_calls"] == 2
    assert res["complete"] + len(res["incomplete"]) == 2
    recs = [json.loads(x) for x in (tmp_path / "out" / "generation" / "records.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in recs] == ["stage1", "stage2"] and all(r["role"] == "generator" for r in recs)
    assert "Incorrect Answer 1: [text]" in recs[0]["prompt"][0]["content"]
    rows = list(csv.DictReader((tmp_path / "out" / "review_sheet.csv").open()))
    assert "fact/g2" in {r["item_id"] for r in rows}
    # the built file loads as charm data
    d, _ = load_data([tmp_path / "out" / "charm_built.yaml"], builtin=False)
    assert "g2" in {f.id for f in d.facts}
    again = build(seeds, "bundled", tmp_path / "out", progress=False, decoding=dec)
    assert again["model_calls"] == 0                                    # resumed from the records


def test_review_keeps_items_both_accept(tmp_path):
    data = tmp_path / "built.yaml"
    data.write_text(NORDIC.read_text())
    cols = ["item_id", "region", "kind", "question", "correct_answer", "distractor_1", "distractor_2",
            "distractor_3", "criterion_1", "criterion_2", "criterion_3", "criterion_4", "comment"]
    ids = [("concept/smartphone", "shared"), ("concept/video-call", "shared"),
           ("fact/greta-thunberg-01", "Nordic"), ("fact/greta-thunberg-02", "Nordic")]
    a_scores = [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 1, 1]]
    b_scores = [[1, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 0, 1, 1]]
    for name, scores in (("a.csv", a_scores), ("b.csv", b_scores)):
        with (tmp_path / name).open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(cols)
            for (i, reg), s in zip(ids, scores):
                w.writerow([i, reg, i.split("/")[0], "q", "a", "x", "y", "z", *s, ""])
    res = review(tmp_path / "a.csv", tmp_path / "b.csv", data, tmp_path / "ok.yaml")
    assert res["accepted"] == 2 and res["reviewed"] == 4
    assert res["kappa"]["Nordic"]["accept"] == 1.0
    assert res["kappa"]["shared"]["accept"] == 0.0       # agree on 1 of 2, at chance
    assert res["kappa"]["overall"]["accept"] == pytest.approx(0.5)
    d, _ = load_data([tmp_path / "ok.yaml"], builtin=False)
    assert [c.id for c in d.concepts] == ["smartphone"] and [f.id for f in d.facts] == ["greta-thunberg-01"]
    assert all(x.validated for x in d.concepts + d.facts)
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(cols) + "\nconcept/smartphone,shared,concept,q,a,x,y,z,1,1,yes,1,\n")
    with pytest.raises(InputError) as exc:
        review(tmp_path / "a.csv", bad, data, tmp_path / "ok2.yaml")
    assert exc.value.line == 2 and exc.value.field == "criterion_3"


# -- end to end through the real model --------------------------------------------------------
@pytest.mark.model
def test_charm_end_to_end_on_the_bundled_model(tmp_path):
    # 30 questions (32 calls, 38 at 36; and the BA Yes control's 3 per role): still 13 BC questions, 7 cross
    # pairs, an override candidate asked again in the control order and a position-bias warning, so every
    # branch below is taken
    res = api.run("charm", model="bundled", limit=30, out=tmp_path / "run", progress=False)
    assert res.counts.errors == 0 and res.manifest.scoring == "logprob"
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["matrix"]["all"]["n"] > 10 and m["override"]["n_cross"] > 0
    # every figure is recomputable from records.jsonl alone
    (tmp_path / "run" / "metrics.json").unlink()
    again, _ = api.build_report(tmp_path / "run")
    assert again == m
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Table 2" in html and "data:image/png;base64" in html
    # the BA Yes control, beside BA accuracy: three in-boundary questions for each role whose BA ran
    yc = m["ba_control"]
    assert yc["n"] == 3 * yc["roles"] > 0 and "BA Yes control: awareness questions whose answer is Yes" in html
    # the demo settings: the 135M model's BC picks pile up at one position (on this small subset
    # the warning's chi-square may not reach p < 0.05 for BC; docs/charm.md has the 300-item run),
    # and a warning that is raised reaches the report
    bc = m["position_bias"]["stages"]["bc"]
    assert bc["answered"] == bc["n"] > 10 and max(bc["pick_share"]) > 50
    warnings = m["position_bias"]["warnings"]
    assert all(w.split(":")[0] in m["position_bias"]["stages"] for w in warnings)
    if warnings:
        assert "Position bias warning" in html
    if m["override"]["ba_pos_fc_bc"]:       # candidates: asked again in the control order
        assert m["override_control"]["n"] == m["override"]["ba_pos_fc_bc"] and "control order" in html


@pytest.mark.model
def test_charm_generation_sequential_and_no_role_on_a_user_region(tmp_path):
    res = api.run("charm", model="bundled", data=str(NORDIC), options={"builtin": False},
                  strategies="independent,sequential,no-role", scoring="generate",
                  decoding={"max_tokens": 8}, out=tmp_path / "run", progress=False)
    m = res.metrics
    assert res.counts.errors == 0
    assert m["matrix"]["all"]["n"] == 4 and m["by_region"].keys() == {"Nordic"}
    assert m["sequential"]["cross"]["n"] == 2 and m["no_role"]["nr_all"]["n"] == 2
    recs = api.load_run(tmp_path / "run")
    assert set(recs["stage"]) == {"ba", "bc", "kv", "seq.ba", "seq.bc", "nr"}
    seq = recs[recs.stage == "seq.bc"].iloc[0]
    assert [p["role"] for p in seq.prompt] == ["user", "assistant", "user"]


from helpers import assert_refused_without_provenance, needs_script  # noqa: E402


@needs_script
@pytest.mark.slow
def test_a_character_without_provenance_is_one_line_through_the_script(tmp_path):
    data = tmp_path / "mine.yaml"
    data.write_text("regions:\n  - {id: X, name: X}\ncharacters:\n  - id: a\n    name: A\n    region: X\n"
                    "    profile: p\n    reality: real\n    period: contemporary\n    universe: u\n")
    assert_refused_without_provenance("charm", data, f"{data}:4, field 'characters[0]'", tmp_path / "run")
