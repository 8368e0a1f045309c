"""multiverse suite: data, parsers, metrics on hand-made records, importer edge cases, build parsers,
and a run through the fake backend. The real model and the real embedder are in
test_multiverse_model.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sklearn.metrics import precision_recall_fscore_support

from rolebound import api
from rolebound.errors import CapabilityError, InputError
from rolebound.suites.multiverse.importers import convert, normalise_options, parse_attributes, parse_source
from rolebound.suites.multiverse.metrics import accuracy_block, compute, cross_block, paired_diff, prf
from rolebound.records import Decoding, Record, RunManifest
from rolebound.scoring.parsers import INVALID
from rolebound.store import load_records
from rolebound.suites.multiverse.prompts import (JUDGE_DIGITS, canon_prompt, dilemma_prompt,
                                                     parse_judge, parse_segments)
from rolebound.suites.multiverse.rules import rule_segments
from rolebound.suites.multiverse.suite import MultiverseSuite
from rolebound.suites.multiverse.data import STARTER, load_file

from conftest import shared_path
from helpers import assert_refused_without_provenance, needs_script

MINI = """\
heroes:
  - id: h
    name: Hero
    note: test fixture
    versions:
      - {id: h-a, name: Alpha, universe: Films A, attributes: {age: 30, race: Human}, note: test fixture}
      - {id: h-b, name: Beta, universe: Films B, note: test fixture}
canon:
  - {version: h-a, phase: childhood, question: 'Who raised you?', options: [Aunt, Uncle, Wolves, Nobody], note: test fixture, answer: A, key: raised}
  - {version: h-b, phase: childhood, question: 'Who raised you?', options: [Aunt, Uncle, Wolves, Nobody], note: test fixture, answer: C, key: raised}
  - {version: h-b, phase: hero, part: 1, question: 'What do you fight?', options: [Crime, Fires, Boredom, Dragons], note: test fixture, answer: D}
dilemmas:
  - version: h-a
    conflict: duty-vs-desire
    situation: A fire and a date.
    choices: [{text: Fight the fire, consequence: miss the date}, {text: Go on the date, consequence: the city burns}]
    canonical: A
    note: test fixture
  - version: h-b
    conflict: duty-vs-desire
    situation: A flood and a concert.
    choices: [{text: Stop the flood, consequence: miss the concert}, {text: Go to the concert, consequence: floods}]
    note: test fixture
"""


def write(tmp_path: Path, text: str, name: str = "mv.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# -- the starter set ---------------------------------------------------------------------------------
def test_starter_set_shape_and_provenance():
    data = load_file(STARTER)
    assert len(data["heroes"]) >= 4
    assert all(len(h.versions) >= 3 for h in data["heroes"])
    per = Counter()
    for it in data["items"]:
        per[(it.version, it.phase if it.task == "canon" else it.conflict)] += 1
        assert it.validated is False and (it.source or it.note), it.id
    for vid in data["versions"]:
        assert per[(vid, "childhood")] == 3 and per[(vid, "pre-hero")] == 3 and per[(vid, "hero")] == 9, vid
        for c in ("save-one-vs-greater-good", "hero-or-villain", "duty-vs-desire", "ends-vs-moral-code"):
            assert per[(vid, c)] == 1, (vid, c)
    for _, ver in data["versions"].values():
        assert ver.validated is False and (ver.source or ver.note)
    letters = Counter(it.answer for it in data["items"] if it.task == "canon")
    assert min(letters.values()) >= 25, letters   # answers spread over A-D, not all "A"
    # every shared question really has the same options in each version that asks it
    by_key = {}
    for it in data["items"]:
        if it.task == "canon" and it.key:
            by_key.setdefault((data["versions"][it.version][0].id, it.key), []).append(it)
    assert len(by_key) >= 12
    for group in by_key.values():
        assert len(group) >= 2 and len({tuple(it.options) for it in group}) == 1
    assert sum(1 for g in by_key.values() if len({it.answer for it in g}) > 1) >= 12


def test_bad_user_data_names_file_line_and_field(tmp_path):
    bad = MINI.replace("answer: D}", "answer: E}")
    with pytest.raises(InputError) as e:
        load_file(write(tmp_path, bad))
    assert e.value.file.endswith("mv.yaml") and e.value.line == 11 and e.value.field == "canon[2].answer"
    bad = MINI.replace("{version: h-b, phase: hero", "{version: h-z, phase: hero")
    with pytest.raises(InputError, match="unknown version 'h-z'") as e:
        load_file(write(tmp_path, bad))
    assert e.value.line == 11 and e.value.field == "canon[2].version"
    bad = MINI.replace("[Crime, Fires, Boredom, Dragons]", "[Crime, Fires, Boredom]")
    with pytest.raises(InputError) as e:
        load_file(write(tmp_path, bad))
    assert e.value.field == "canon[2].options"
    bad = MINI.replace("phase: hero, part: 1", "phase: childhood, part: 1")
    with pytest.raises(InputError, match="part"):
        load_file(write(tmp_path, bad))
    bad = MINI.replace("canonical: A", "canonical: C")
    with pytest.raises(InputError) as e:
        load_file(write(tmp_path, bad))
    assert e.value.field == "dilemmas[0].canonical"


@needs_script
@pytest.mark.slow
def test_an_entry_without_provenance_is_one_line_through_the_script(tmp_path):
    data = write(tmp_path, MINI.replace("universe: Films B, note: test fixture}", "universe: Films B}"))
    assert_refused_without_provenance("multiverse", data, f"{data}:7, field 'heroes[0].versions[1]'", tmp_path / "run")


@pytest.mark.slow
def test_select_spreads_a_small_limit_over_versions():
    suite = MultiverseSuite()
    ds = suite.load(None, suite.run_settings(["direct"]))
    picked = suite.select(ds.items, 12)
    assert len({it.version for it in picked}) == 12
    picked = suite.select(ds.items, 48)
    assert {it.task for it in picked} == {"canon", "dilemma"}
    assert {it.phase for it in picked if it.task == "canon"} == {"childhood", "pre-hero", "hero"}


def test_prompts_follow_the_paper_template():
    p = canon_prompt("You are playing the role of X, act and think as X, from Y", "Q?", ["a", "b", "c", "d"], cot=False)
    assert p == "You are playing the role of X, act and think as X, from Y\n <question> Q?\nA) a\nB) b\nC) c\nD) d <question/>"
    p = canon_prompt("P", "Q?", ["a", "b", "c", "d"], cot=True)
    assert p.endswith("D) d, Let's think step by step.<question/>")
    p = dilemma_prompt("P", "S.", [("go", "bad"), ("stay", "worse")], "hero-or-villain", cot=False)
    assert p == ("P, the situation is S.\nChoice A: go Consequence A: bad\nChoice B: stay Consequence B: worse\n"
                 " <question> About morality and identity crisis, what will you choose between A) Hero vs B) Villain <question/>")


# -- parsers -------------------------------------------------------------------------------------
def test_parse_segments():
    got = parse_segments("```\n<thinking>I fear for her.</thinking>\n<acting>I jump.</acting>\n"
                         "<Thinking>Again?</Thinking><acting> </acting>```")
    assert got == {"thinking": ["I fear for her.", "Again?"], "acting": ["I jump."]}
    assert parse_segments("<thinking>only thoughts</thinking>") == INVALID
    assert parse_segments("thinking: x acting: y") == INVALID
    assert parse_segments(None) == INVALID


def test_rule_segments_split_reasoning_from_the_stated_answer():
    got = rule_segments("Gwen is falling and I may not reach her. Saving her risks the train.\n\n"
                        "The answer is:\nA) Save Gwen\n\nThe train can wait.")
    assert got == {"thinking": ["Gwen is falling and I may not reach her. Saving her risks the train.",
                                "The train can wait."],
                   "acting": ["The answer is: A) Save Gwen"], "segmenter": "rules"}
    # no sentence states an answer: the last one is the final response
    assert rule_segments("I think about my uncle. I put on the mask.")["acting"] == ["I put on the mask."]
    # repeats count once, marker-only fragments are dropped: nothing left to pair
    assert rule_segments("The answer is B.\nThe answer is B.\nA:\nA: A: A:") == INVALID
    assert rule_segments("I choose B.") == INVALID and rule_segments("") == INVALID and rule_segments(None) == INVALID
    # a reply cut at the token cap loses its unfinished last sentence, not a finished one
    assert rule_segments("I fear the worst. I will fight. And then the", cut=True)["acting"] == ["I will fight."]
    assert rule_segments("I fear the worst. I will fight.", cut=True)["acting"] == ["I will fight."]


def test_rule_segments_read_decisions_with_the_questions_options():
    # the shared reader (scoring.choice) with the options: a decision that names an option by its
    # title is acting, though no letter is in it and it is not the last sentence
    options = [("A", "Save the One You Love: Go after Vicki first"),
               ("B", "Save the Greater Good: Take the balloons away first")]
    reply = "The gas is spreading and Vicki is up in the tower. I will go with the Greater Good. Vicki would understand."
    got = rule_segments(reply, options=options)
    assert got["acting"] == ["I will go with the Greater Good."]
    assert got["thinking"] == ["The gas is spreading and Vicki is up in the tower.", "Vicki would understand."]
    # without the options the title means nothing: the last sentence is the final response
    assert rule_segments(reply)["acting"] == ["Vicki would understand."]


def test_rule_segments_a_mention_of_one_option_is_thinking():
    options = [("A", "Mary Jane Watson"), ("B", "Betty Brant"), ("C", "Gwen Stacy"), ("D", "Liz Allan")]
    # the reply answers by stating option A's text: that sentence acts, the others think
    reply = "I remember the house next door. The girl next door I have loved since I was a boy is Mary Jane Watson."
    assert rule_segments(reply, options=options)["acting"] == [reply.split(". ", 1)[1]]
    # a review that mentions options one sentence at a time commits to none of them
    review = ("Mary Jane Watson is a character who appears in several of the films about me and my friends from "
              "school. Gwen Stacy is another character who appears in those same films about my years in high school. "
              "I will go with the one I trust.")
    assert rule_segments(review, options=options)["acting"] == ["I will go with the one I trust."]


def test_judge_digits_make_well_formed_pairs():
    assert JUDGE_DIGITS == ["0", "1", "2", "3", "4", "5"]
    assert all(parse_judge(f"{t},{a}") != INVALID for t in JUDGE_DIGITS for a in JUDGE_DIGITS)


@pytest.mark.parametrize("text,expected", [
    ("3,2", {"thinking": 3.0, "acting": 2.0}),
    ("**4, 5**", {"thinking": 4.0, "acting": 5.0}),
    ("Scores: 2.5,3", {"thinking": 2.5, "acting": 3.0}),
    ("1. Thinking is good, 3, 2", INVALID),           # the first number is not the score pair
    ("6,2", INVALID),
    ("think 3 act 2", INVALID),
    ("", INVALID),
    # the prompt's own key names, one line each (what Qwen2.5-Coder-1.5B writes)
    ("think_score: 3\nact_score: 2", {"thinking": 3.0, "acting": 2.0}),
    ("**Thinking score:** 4\n**Acting score:** 5/5", {"thinking": 4.0, "acting": 5.0}),
    ("think_score: 3", INVALID),                              # one score is no pair
    ("think_score: 3\nact_score: 2\nthink_score: 4", INVALID),  # two different thinking scores
    ("think_score: 7/10\nact_score: 2", INVALID),              # another scale
    ("think_score: 6\nact_score: 2", INVALID),
])
def test_parse_judge(text, expected):
    assert parse_judge(text) == expected


# -- metrics on hand-made records -------------------------------------------------------------------
def rec(item, strategy, stage, parsed, gold, *, task="canon", **meta) -> Record:
    correct = None if gold is None else (parsed != INVALID and parsed == gold)
    return Record(call_id=f"{item}/{strategy}/{stage}", item_id=item, suite="multiverse", strategy=strategy,
                  stage=stage, parsed=parsed, gold=gold, correct=correct,
                  role="judge" if stage.split("@")[0] in ("judge", "segment") else "model",
                  meta={"task": task, "letters": "ABCD" if task == "canon" else "AB", **meta})


def manifest(strategies) -> RunManifest:
    return RunManifest(suite="multiverse", strategies=strategies, model="fake:random", backend="fake",
                       decoding=Decoding(), dataset="x", dataset_hash="0", n_items=1, package_version="0")


def test_prf_matches_sklearn_with_invalid_answers():
    gold = list("AABBCCDDAB")
    pred = ["A", "B", "B", INVALID, "C", "A", "D", "D", INVALID, "B"]
    got = prf(gold, pred)
    labels = ["A", "B", "C", "D"]
    for avg in ("macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=labels, average=avg, zero_division=0)
        assert got[avg]["precision"] == pytest.approx(100 * p)
        assert got[avg]["recall"] == pytest.approx(100 * r)
        assert got[avg]["f1"] == pytest.approx(100 * f)
    # weighted recall is accuracy (the paper's Recall column)
    assert got["weighted"]["recall"] == pytest.approx(100 * sum(g == p for g, p in zip(gold, pred)) / len(gold))


def test_weighted_f1_is_the_headline_and_its_bootstrap_matches_sklearn():
    from rolebound.suites.multiverse.metrics import _codes, _f1_of

    gold = list("AAAABBCD")
    pred = ["A", "A", "B", INVALID, "B", "A", "C", "A"]
    g, p, k = _codes(gold, pred, "ABCD")
    for avg in ("macro", "weighted"):
        f = precision_recall_fscore_support(gold, pred, labels=list("ABCD"), average=avg, zero_division=0)[2]
        assert _f1_of(g, p, k, avg) == pytest.approx(f)
    recs = [rec(f"i{j}", "direct", "answer", pr, go) for j, (go, pr) in enumerate(zip(gold, pred))]
    block = accuracy_block(recs, "phase", ["childhood"])
    lo, hi = block["weighted_f1_ci"]
    w = precision_recall_fscore_support(gold, pred, labels=list("ABCD"), average="weighted", zero_division=0)[2]
    assert block["weighted"]["f1"] == pytest.approx(100 * w) and lo <= block["weighted"]["f1"] <= hi
    same = paired_diff(pred, pred, stat="f1", letters="ABCD", gold=gold, average="weighted")
    assert same["diff"] == 0.0


def test_accuracy_block_by_phase_part_and_invalid():
    recs = [rec("a", "direct", "answer", "A", "A", phase="childhood"),
            rec("b", "direct", "answer", INVALID, "B", phase="childhood"),
            rec("c", "direct", "answer", "C", "C", phase="hero", part=2),
            rec("d", "direct", "answer", "A", "D", phase="hero", part=2)]
    b = accuracy_block(recs, "phase", ("childhood", "pre-hero", "hero"))
    assert b["n"] == 4 and b["invalid"] == 1 and b["acc"]["rate"] == 50.0
    assert b["by_phase"]["childhood"]["rate"] == 50.0 and "pre-hero" not in b["by_phase"]
    assert b["by_part"] == {"hero2": pytest.approx(b["by_part"]["hero2"])} and b["by_part"]["hero2"]["rate"] == 50.0
    assert b["acc"]["lo"] <= 50.0 <= b["acc"]["hi"]


def test_dilemmas_without_gold_count_in_choice_shares_only():
    recs = [rec("x", "direct", "answer", "A", "A", task="dilemma", conflict="duty-vs-desire"),
            rec("y", "direct", "answer", "B", None, task="dilemma", conflict="duty-vs-desire"),
            rec("z", "direct", "answer", "A", None, task="dilemma", conflict="hero-or-villain")]
    b = accuracy_block(recs, "conflict", ("duty-vs-desire", "hero-or-villain"))
    assert b["labelled"] == 1 and b["acc"]["rate"] == 100.0 and b["acc"]["n"] == 1
    assert b["choice_share"]["A"]["rate"] == pytest.approx(200 / 3)
    assert b["first_pole_share"]["duty-vs-desire"]["rate"] == 50.0


@pytest.mark.slow
def test_cot_minus_direct_is_paired_and_signed():
    recs = []
    for i in range(10):
        recs.append(rec(f"q{i}", "direct", "answer", "A", "A" if i < 4 else "B"))   # 4/10 right
        recs.append(rec(f"q{i}", "cot", "answer", "A", "A" if i < 7 else "B"))      # 7/10 right
    recs.append(rec("only-cot", "cot", "answer", "A", "A"))                        # unpaired: ignored
    m = compute(recs, manifest(["direct", "cot"]))
    d = m["cot_minus_direct"]["canon"]["acc"]
    assert d["n"] == 10 and d["diff"] == pytest.approx(30.0) and d["lo"] <= 30.0 <= d["hi"]
    assert m["cot_minus_direct"]["canon"]["tam"] is None
    assert paired_diff([0.2, 0.4], [0.5, 0.5])["diff"] == pytest.approx(0.2)
    # --repeats: items pair up within each repeat
    again = [r.model_copy(update={"repeat": 1, "call_id": r.call_id + "#1"}) for r in recs]
    m = compute(recs + again, manifest(["direct", "cot"]))
    assert m["cot_minus_direct"]["canon"]["acc"]["n"] == 20


def test_cross_version_drop_and_whose_answer():
    recs = [rec("q1", "direct", "answer", "A", "A", version="v1", played="v1"),
            rec("q2", "direct", "answer", "B", "B", version="v1", played="v1"),
            # played v2 answering v1's questions: q1 the versions differ (v2's answer is C)
            rec("q1", "cross-direct", "as.v2", "C", "A", version="v1", played="v2", gold_own="C", hero="h"),
            rec("q1", "cross-direct", "as.v3", "A", "A", version="v1", played="v3", gold_own="D", hero="h"),
            rec("q2", "cross-direct", "as.v2", "B", "B", version="v1", played="v2", gold_own="B", hero="h"),
            rec("q2", "cross-direct", "as.v3", INVALID, "B", version="v1", played="v3", gold_own=None, hero="h")]
    b = cross_block(recs, "cross-direct", "canon")
    assert b["acc"]["rate"] == 50.0 and b["in_version"]["rate"] == 100.0
    assert b["drop"]["diff"] == pytest.approx(50.0)
    assert b["differs"]["n"] == 2
    assert b["differs"]["played_version"]["rate"] == 50.0 and b["differs"]["asked_version"]["rate"] == 50.0
    assert {(p["played"], p["asked"]) for p in b["by_pair"]} == {("v2", "v1"), ("v3", "v1")}


def test_analysis_block_reads_tam_and_judge_from_records():
    seg_ok = rec("q1", "cot", "segment", {"thinking": ["t"], "acting": ["a"], "pairs": 1, "tam": 0.4}, None)
    seg_bad = rec("q2", "cot", "segment", INVALID, None)
    judge = rec("q1", "cot", "judge", {"thinking": 4.0, "acting": 2.0}, None)
    judge_bad = rec("q2", "cot", "judge", INVALID, None)
    ans = [rec("q1", "cot", "answer", "A", "A"), rec("q2", "cot", "answer", "B", "A")]
    m = compute(ans + [seg_ok, seg_bad, judge, judge_bad], manifest(["cot"]))
    a = m["strategies"]["cot"]["canon"]["analysis"]
    assert a["tam"]["mean"] == 0.4 and a["tam"]["n"] == 1 and a["segment_invalid"] == 1
    assert a["judge_thinking"]["mean"] == 4.0 and a["judge_acting"]["mean"] == 2.0 and a["judge_invalid"] == 1


def test_analysis_block_keeps_rule_segments_apart():
    llm = rec("q1", "cot", "segment", {"thinking": ["t"], "acting": ["a"], "pairs": 1, "tam": 0.4, "segmenter": "llm"},
              None, segment_fallback="rules")
    rules = rec("q2", "cot", "segment", {"thinking": ["t"], "acting": ["a"], "pairs": 1, "tam": 0.9,
                                         "segmenter": "rules"}, None, segment_fallback="rules")
    neither = rec("q3", "cot", "segment", INVALID, None, segment_fallback="rules")
    judges = [rec(f"q{i}", "cot", "judge", {"thinking": t, "acting": a}, None, judge_scoring="logprob")
              for i, (t, a) in enumerate([(3.0, 2.0), (3.0, 2.0), (1.0, 4.0)], 1)]
    ans = [rec(f"q{i}", "cot", "answer", "A", "A") for i in (1, 2, 3)]
    a = compute(ans + [llm, rules, neither] + judges, manifest(["cot"]))["strategies"]["cot"]["canon"]["analysis"]
    assert a["tam"]["mean"] == 0.4 and a["tam"]["n"] == 1          # the LLM segmenter's only
    assert a["segment_invalid"] == 2 and a["rules_tried"] == 2 and a["rules_invalid"] == 1
    assert a["tam_rules"]["mean"] == 0.9 and a["tam_rules"]["n"] == 1
    assert a["judge_scoring"] == "logprob" and a["judge_top"] == {"pair": "3,2", "n": 2}


def test_judge_scoring_and_segment_fallback_options():
    from rolebound.models.base import CHAT
    from rolebound.models.fake import FakeBackend

    suite, fake = MultiverseSuite(), FakeBackend("random")
    settings = suite.run_settings(["cot"], scoring="logprob")
    suite.check(fake, settings)
    assert settings.options.given()["judge_scoring"] == "logprob" and settings.options.given()["segment_fallback"] == "rules"
    settings = suite.run_settings(["cot"], scoring="logprob",
                           options={"judge_scoring": "Generate", "segment_fallback": "none"})
    suite.check(fake, settings)
    assert settings.options.given()["judge_scoring"] == "generate" and settings.options.given()["segment_fallback"] == "none"
    with pytest.raises(InputError, match="option 'judge_scoring' of suite multiverse expects one of"):
        suite.check(fake, suite.run_settings(["cot"], scoring="logprob", options={"judge_scoring": "maybe"}))
    chat_only = FakeBackend("random")
    chat_only.capabilities = frozenset({CHAT})
    with pytest.raises(CapabilityError, match="judge_scoring=logprob"):
        suite.check(fake, suite.run_settings(["cot"], scoring="logprob", options={"judge_scoring": "logprob"}),
                    chat_only)
    settings = suite.run_settings(["cot"], scoring="logprob")
    suite.check(fake, settings, chat_only)
    assert settings.options.given()["judge_scoring"] == "generate"      # a judge that cannot score writes its scores


# -- importer edge cases -------------------------------------------------------------------------------
def test_normalise_options_rules():
    q, o, how = normalise_options("Q", ["what degree?", "A) x", "B)  y", "C) z", "D) w"])
    assert q == "Q\nwhat degree?" and o == ["x", "y", "z", "w"] and "sub-question" in how
    q, o, how = normalise_options("Q", ["Marvel", "A) x", "B) y", "C) z", "D) w", "Reddit"])
    assert q == "Q" and o == ["x", "y", "z", "w"] and "'Marvel'" in how and "'Reddit'" in how
    q, o, how = normalise_options("Q", ["A. first thing B. second thing", "C. z", "D. w"])
    assert o == ["first thing", "second thing", "z", "w"]
    q, o, how = normalise_options("Q", ["A) x", "B) y", "C) z", "D) w", "/n/n/n", "next?", "A) p", "B) q", "C) r", "D) s"])
    assert o is None and "not ABCD" in how
    q, o, how = normalise_options("Q", ["A) x", "B) y", "D) w"])
    assert o is None
    assert normalise_options("Q", ["A) x", "B) y", "C) z", "D) w"]) == ("Q", ["x", "y", "z", "w"], "")


def test_source_and_attribute_parsing():
    assert parse_source(["MCU", "film"]) == (["MCU", "film"], False)
    assert parse_source("['Marvel Comics', 'earth 616']") == (["Marvel Comics", "earth 616"], False)
    assert parse_source('["marvel game","Marvel"s Guardians of the Galaxy (2021)"]') == (
        ["marvel game", "Marvel's Guardians of the Galaxy (2021)"], True)
    assert parse_attributes("Age:53,\nPower:Powered armor suit,\nMbti:ENTP,\nRace:Human,\nEnneagram:7w8") == {
        "age": "53", "power": "Powered armor suit", "mbti": "ENTP", "race": "Human", "enneagram": "7w8"}
    assert parse_attributes("Age:39\nPower:-,\nMbti:ENTP") == {"age": "39", "mbti": "ENTP"}


def test_importer_reports_broken_items_and_never_crashes(tmp_path):
    canon = [{"UID": 1, "Name": " Tony  Stark \u201cIron Man\u201d", "CID": 1, "Source": ["MCU", "endgame"],
              "Events": {"Childhood": [
                  {"question": "Q1", "options": ["A) a", "B) b", "C) c", "D) d"], "correct_answer": "A"},
                  {"question": "Q2", "options": ["A) a", "B) b", "C) c"], "correct_answer": "B"},
                  {"question": "Q3", "options": ["A) a", "B) b", "C) c", "D) d ****"], "correct_answer": "D"},
                  {"question": "Q4", "options": ["A) a", "B) b", "C) c", "D) d"], "correct_answer": "E"}]}},
             {"UID": 1, "Name": 'Tony Stark "Iron Man"', "CID": 2, "Source": "['Comics','616']", "Events": {}}]
    dil = [{"situation": "s", "choice_A": "a", "choice_B": "b", "consequence_A": "ca", "consequence_B": "cb",
            "UID": 1, "CID": 1, "name": "x", "lore": "[]", "dilemma_type": "Hero or Villain_2", "iteration": 2},
           {"situation": "s", "choice_A": "", "choice_B": "b", "consequence_A": "ca", "consequence_B": "cb",
            "UID": 1, "CID": 1, "name": "x", "lore": "[]", "dilemma_type": "Hero or Villain_3", "iteration": 3}]
    (tmp_path / "characters_canon_events.json").write_text(json.dumps(canon))
    (tmp_path / "character_dilemmas.json").write_text(json.dumps(dil))
    doc = convert(tmp_path)
    assert [c["id"] for c in doc["canon"]] == ["cid-1-childhood-1", "cid-1-childhood-3"]
    assert doc["canon"][1]["options"][3] == "d"
    irr = {r["id"]: r for r in doc["import_report"]["irregular"]}
    assert irr["cid-1-childhood-2"]["action"] == "skipped" and irr["cid-1-childhood-4"]["action"] == "skipped"
    assert irr["cid-1-childhood-3"]["action"] == "kept" and "****" in irr["cid-1-childhood-3"]["why"]
    assert doc["heroes"][0]["name"] == 'Tony Stark "Iron Man"' and len(doc["heroes"][0]["versions"]) == 2
    assert [d["id"] for d in doc["dilemmas"]] == ["cid-1-hero-or-villain-2"]
    assert doc["dilemmas"][0]["canonical"] is None
    with pytest.raises(InputError, match="file not found"):
        convert(tmp_path / "nowhere")


@pytest.mark.slow
def test_importer_loads_the_full_public_release(tmp_path):
    src = shared_path("data", "external", "Beyond_One_World")
    from rolebound.suites.multiverse.importers import import_beyond_one_world

    out = tmp_path / "bow.json"
    summary = import_beyond_one_world(str(src), str(out))
    assert "30 heroes, 90 versions" in summary
    doc = json.loads(out.read_text())
    rep = doc["import_report"]
    assert rep["counts"]["canon questions in the release"] == 1346
    assert rep["counts"]["dilemmas in the release"] == 1080 and len(doc["dilemmas"]) == 1080
    assert all(d["canonical"] is None for d in doc["dilemmas"])
    irregular_count = [r for r in rep["irregular"] if r["options given"] != 4]
    assert len(irregular_count) == 44                       # SOURCE.md: 44 items without four options
    skipped = [r for r in rep["irregular"] if r["action"] == "skipped"]
    assert len(doc["canon"]) + len(skipped) == 1346
    assert not any("****" in o for c in doc["canon"] for o in c["options"])
    data = load_file(out)                                   # loadable with --data
    assert len(data["versions"]) == 90 and len(data["heroes"]) == 30
    assert Counter(it.conflict for it in data["items"] if it.task == "dilemma") == {
        "save-one-vs-greater-good": 270, "hero-or-villain": 270, "duty-vs-desire": 270, "ends-vs-moral-code": 270}
    suite = MultiverseSuite()
    ds = suite.load(str(out), suite.run_settings(["direct"]))
    titles = [t for t, _ in suite.stats(ds)]
    assert "Import report" in titles and "Canon items changed or skipped on import" in titles


# -- a run through the fake backend ---------------------------------------------------------------
@pytest.mark.slow
def test_fake_run_writes_every_stage_with_grouping_meta(tmp_path):
    data = write(tmp_path, MINI)
    res = api.run("multiverse", model="fake:random", data=str(data), out=tmp_path / "run", progress=False,
                  scoring="generate", strategies="direct,cot,cross-direct,cross-cot", options={"analysis": False})
    recs = load_records(tmp_path / "run")
    stages = Counter((r.strategy, r.stage) for r in recs)
    assert stages[("direct", "answer")] == 5 and stages[("cot", "answer")] == 5
    assert stages[("cross-direct", "as.h-b")] == 2 and stages[("cross-direct", "as.h-a")] == 3
    assert not any(r.stage in ("segment", "judge") for r in recs)
    q = next(r for r in recs if r.item_id == "h-a-childhood-1" and r.strategy == "cross-direct")
    assert q.meta["played"] == "h-b" and q.meta["version"] == "h-a" and q.meta["gold_own"] == "C" and q.gold == "A"
    d = next(r for r in recs if r.item_id == "h-b-duty-vs-desire-1" and r.strategy == "cross-direct")
    assert d.meta["gold_own"] == "A" and d.gold is None and d.correct is None
    assert "Beta" in q.prompt[0]["content"] and "Films B" in q.prompt[0]["content"]
    assert set(res.metrics["cross"]) == {"cross-direct", "cross-cot"}
    assert (tmp_path / "run" / "report.html").exists()


@pytest.mark.slow
def test_logprob_cot_reads_the_letter_after_the_reasoning(tmp_path):
    data = write(tmp_path, MINI)
    api.run("multiverse", model="fake:random", data=str(data), out=tmp_path / "run", progress=False,
            scoring="logprob", strategies="direct,cot", options={"analysis": False})
    recs = load_records(tmp_path / "run")
    reason = next(r for r in recs if r.stage == "answer.reason" and r.item_id == "h-b-hero-1")
    answer = next(r for r in recs if r.stage == "answer" and r.strategy == "cot" and r.item_id == "h-b-hero-1")
    assert answer.kind == "score" and answer.continuations == [" A", " B", " C", " D"]
    assert answer.prompt[-1]["content"] == reason.response.rstrip() + "\n\nAnswer:"
    direct = next(r for r in recs if r.stage == "answer" and r.strategy == "direct" and r.item_id == "h-b-hero-1")
    assert direct.prompt[-1] == {"role": "assistant", "content": "Answer:"} and direct.parsed in "ABCD"


def test_unknown_option_and_task_filter(tmp_path):
    data = write(tmp_path, MINI)
    with pytest.raises(InputError, match="unknown option 'colour'"):
        api.run("multiverse", model="fake:random", data=str(data), out=tmp_path / "r", progress=False,
                options={"colour": "red"})
    res = api.run("multiverse", model="fake:random", data=str(data), out=tmp_path / "r2", progress=False,
                  strategies="direct", options={"tasks": "dilemma", "analysis": False})
    assert res.manifest.n_items == 2


# -- construction pipeline -----------------------------------------------------------------------
def test_build_parsers_are_strict():
    from rolebound.suites.multiverse.build import parse_dilemma, parse_distractors

    assert parse_distractors("1. a cat\n2. a dog\n3. a fish", "a bird") == ["a cat", "a dog", "a fish"]
    assert parse_distractors("1. a cat\n2. a dog", "a bird") == INVALID
    assert parse_distractors("1. a cat\n2. a dog\n3. A Bird", "a bird") == INVALID      # repeats the answer
    assert parse_distractors("Sure! 1. a\n2. b\n3. c", "x") == INVALID
    good = {"situation": "s", "choice_A": "a", "consequence_A": "ca", "choice_B": "b", "consequence_B": "cb"}
    assert parse_dilemma("```json\n" + json.dumps(good) + "\n```") == good
    assert parse_dilemma(json.dumps({**good, "choice_B": ""})) == INVALID
    assert parse_dilemma("Here it is: " + json.dumps(good)) == INVALID


def test_build_pipeline_writes_dataset_and_review_sheet(tmp_path):
    from rolebound.suites.multiverse.build import run_build

    seeds = STARTER.parent / "seeds_example.yaml"
    res = run_build(seeds, tmp_path / "out", model="fake:constant", per_type=2)
    assert res["canon"] == 0 and res["dilemmas"] == 0 and res["failed"] == 2 + 2 * 4 * 2   # "No." parses as nothing
    assert (tmp_path / "out" / "review.csv").read_text().count("generation failed") == 18

    res = run_build(seeds, tmp_path / "canon", model="fake:constant", dilemmas=False,
                    backend_options={"text": "1. In a cave\n2. At a circus\n3. In Oscorp's basement"})
    assert res["canon"] == 2 and res["failed"] == 0
    data = load_file(tmp_path / "canon" / "dataset.yaml")
    q = data["items"][0]
    assert q.options[ord(q.answer) - 65] == "On a school field trip to a university genetics laboratory"
    assert sorted(q.options)[0] == "At a circus" and q.validated is False and "needs expert review" in q.note

    reply = json.dumps({"situation": "A storm hits the city.", "choice_A": "Save May", "consequence_A": "c1",
                        "choice_B": "Save the ferry", "consequence_B": "c2"})
    res = run_build(seeds, tmp_path / "dil", model="fake:constant", per_type=2, canon=False,
                    backend_options={"text": reply})
    assert res["dilemmas"] == 16 and res["failed"] == 0
    data = load_file(tmp_path / "dil" / "dataset.yaml")
    assert all(it.validated is False and it.canonical is None for it in data["items"])
    sheet = (tmp_path / "dil" / "review.csv").read_text()
    assert sheet.count("to review") == 16 and "reviewer decision" in sheet.splitlines()[0]
    log = [json.loads(x) for x in (tmp_path / "dil" / "generation.jsonl").read_text().splitlines()]
    second = next(e for e in log if e["iteration"] == 2)
    assert "A storm hits the city." in second["prompt"] and "clearly different" in second["prompt"]
    first = next(e for e in log if e["iteration"] == 1)
    assert "clearly different" not in first["prompt"]


def test_build_records_its_calls_and_resumes_without_calls(tmp_path):
    from rolebound.errors import RoleboundError
    from rolebound.store import load_records
    from rolebound.suites.multiverse.build import run_build

    seeds = STARTER.parent / "seeds_example.yaml"
    first = run_build(seeds, tmp_path / "out", model="fake:random", per_type=2)
    recs = load_records(tmp_path / "out" / "generation")
    assert first["model_calls"] == len(recs) == 2 + 2 * 4 * 2 and first["resumed"] == 0
    # iteration 2 of a dilemma is its own repeat: a new seed, not the cached reply of iteration 1
    assert {r.repeat for r in recs if r.strategy == "dilemma"} == {0, 1}
    sheet = (tmp_path / "out" / "review.csv").read_text()
    again = run_build(seeds, tmp_path / "out", model="fake:random", per_type=2, use_cache=False)
    assert again["model_calls"] == 0 and again["resumed"] == first["model_calls"]
    assert (tmp_path / "out" / "review.csv").read_text() == sheet
    with pytest.raises(RoleboundError, match="different build"):
        run_build(seeds, tmp_path / "out", model="fake:random", per_type=3)
    assert run_build(seeds, tmp_path / "out", model="fake:random", per_type=3, overwrite=True)["resumed"] == 0


def test_build_retries_a_failed_call_on_resume(tmp_path, monkeypatch):
    from rolebound.suites.multiverse.build import run_build

    seeds = STARTER.parent / "seeds_example.yaml"
    monkeypatch.setenv("ROLEBOUND_FAKE_FAIL", "Write three wrong answers")      # the canon prompts
    first = run_build(seeds, tmp_path / "out", model="fake:random", per_type=1)
    assert "(call failed)" in (tmp_path / "out" / "review.csv").read_text()
    monkeypatch.delenv("ROLEBOUND_FAKE_FAIL")
    again = run_build(seeds, tmp_path / "out", model="fake:random", per_type=1)
    assert again["model_calls"] == 2 and again["resumed"] == first["model_calls"] - 2
    assert "(call failed)" not in (tmp_path / "out" / "review.csv").read_text()


def test_generation_caps_follow_the_runs_backends_not_suite_state():
    from rolebound.suites.multiverse.strategies import LIMITS, SMALL_LIMITS, limit

    suite = MultiverseSuite()
    bundled = suite.run_settings(["cot"], backend="bundled", demo=True, judge="bundled")
    assert limit(suite, bundled, "cot_max_tokens") == SMALL_LIMITS["cot_max_tokens"]
    assert limit(suite, bundled, "judge_max_tokens") == SMALL_LIMITS["judge_max_tokens"]
    api_judge = suite.run_settings(["cot"], backend="bundled", demo=True, judge="openai:gpt-4o-mini")
    assert limit(suite, api_judge, "cot_max_tokens") == SMALL_LIMITS["cot_max_tokens"]
    assert limit(suite, api_judge, "segment_max_tokens") == LIMITS["segment_max_tokens"]
    # the second bundled model follows the formats: the full caps, also as the judge
    qwen = suite.run_settings(["cot"], backend="bundled", judge="bundled:qwen2.5-coder-1.5b")
    assert limit(suite, qwen, "cot_max_tokens") == LIMITS["cot_max_tokens"]
    assert limit(suite, qwen, "segment_max_tokens") == LIMITS["segment_max_tokens"]
    assert limit(suite, suite.run_settings(["cot"], backend="openai", options={"cot_max_tokens": 7}),
                 "cot_max_tokens") == 7


class _FlatEmbedder:
    name = "flat (test)"

    def cosine_matrix(self, a, b):
        import numpy as np

        return np.ones((len(a), len(b)))


@pytest.mark.slow
def test_rejudge_replaces_the_judge_not_the_segmenter(tmp_path, monkeypatch):
    """`rolebound report RUN --judge MODEL` works on multiverse: round 1 is judge@1 (read by the new
    judge's default rule), the metrics read it, the segmenter's records stay, and the same judge
    asked again resumes round 1."""
    from rolebound.rejudge import Rejudged, rejudge
    from rolebound.scoring import embeddings

    monkeypatch.setattr(embeddings, "LazyEmbedder", lambda path=None, kind=None: _FlatEmbedder())
    monkeypatch.setattr(embeddings, "mpnet_available", lambda: False)
    data = write(tmp_path, MINI)
    out = tmp_path / "run"
    api.run("multiverse", model="fake:random", judge="fake:echo", data=str(data), out=out, progress=False,
            scoring="generate", strategies="cot", limit=3, options={"judge_input": "raw", "judge_scoring": "generate"})
    before = load_records(out)
    judged = [r for r in before if r.stage == "judge"]
    assert judged and all(not isinstance(r.parsed, dict) for r in judged)     # echo: unreadable scores
    got = rejudge(out, "fake:random", progress=False)
    assert got == Rejudged(round=1, judge="fake:random", answers=len(judged), failed=0, mode="logprob")
    after = load_records(out)
    assert [r for r in after if r.stage == "segment"] == [r for r in before if r.stage == "segment"]
    new = [r for r in after if r.stage == "judge@1"]
    assert len(new) == len(judged) and all(isinstance(r.parsed, dict) and r.meta["judge_round"] == 1 for r in new)
    metrics, _ = api.build_report(out)
    blocks = [b["analysis"] for b in metrics["strategies"]["cot"].values() if "analysis" in b]
    assert sum(b["judge_calls"] for b in blocks) == len(new) and all(b["judge_invalid"] == 0 for b in blocks)
    assert {b["judge_scoring"] for b in blocks} == {"logprob"}
    lines = (out / "records.jsonl").read_text().count("\n")
    assert rejudge(out, "fake:random", progress=False).round == 1         # same judge: resumes round 1
    assert (out / "records.jsonl").read_text().count("\n") == lines
    assert [r["round"] for r in api.load_manifest(out).rejudges] == [1, 1]


@pytest.mark.slow
def test_permutations_shift_canon_options_and_swap_dilemma_poles_with_their_choices(tmp_path):
    data = write(tmp_path, MINI)
    res = api.run("multiverse", model="fake:random", data=str(data), out=tmp_path / "run", progress=False,
                  scoring="generate", strategies="direct,cross-direct", options={"analysis": False, "permutations": 3})
    recs = load_records(tmp_path / "run")
    stages = Counter((r.strategy, r.stage) for r in recs)
    assert stages[("direct", "answer")] == 5 and stages[("direct", "answer~s2")] == 3   # canon: 3 shifts
    assert stages[("direct", "answer~s1")] == 5 and not any("~s" in r.stage for r in recs
                                                            if r.strategy == "cross-direct")
    base = next(r for r in recs if r.stage == "answer" and r.meta["task"] == "canon")
    s1 = next(r for r in recs if r.stage == "answer~s1" and r.item_id == base.item_id)
    assert s1.meta["order"] == [3, 0, 1, 2] and s1.gold == "ABCD"[(("ABCD".index(base.gold)) + 1) % 4]
    d0 = next(r for r in recs if r.stage == "answer" and r.meta["task"] == "dilemma")
    d1 = next(r for r in recs if r.stage == "answer~s1" and r.item_id == d0.item_id)
    q0, q1 = d0.prompt[0]["content"], d1.prompt[0]["content"]
    a0 = q0.split("Choice A: ")[1].split(" Consequence A")[0]
    assert q1.split("Choice B: ")[1].startswith(a0)                 # choice A is shown as B ...
    assert "A) Personal Desire vs. B) Duty" in q1 and "A) Duty vs. B) Personal Desire" in q0   # ... with its pole
    m = res.metrics
    assert m["shifts"]["canon"]["shifts"] == 3 and m["shifts"]["dilemma"]["shifts"] == 2
    assert m["strategies"]["direct"]["canon"]["n"] == 3               # the paper's figure: unshifted only
