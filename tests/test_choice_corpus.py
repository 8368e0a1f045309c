"""The answer extractor on the whole labelled reply corpus (tests/data/replies/, see its README).

Bars from issue 12: recall >= 0.95 on replies that commit to an answer, no wrong reading, at most
2% false commits on replies that commit to none. Figures per model/suite: bench/extraction.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rolebound.scoring.choice import choice_reading, yes_no_reading

CORPUS = Path(__file__).parent / "data" / "replies"
ROWS = [json.loads(line) for f in sorted(CORPUS.glob("*.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
# The tests below read the corpus three and a half times over (all, dev and heldout, each reader,
# the blind splits): each reply is read once per process (ids are unique, checked below), and the
# file stays on one pytest-xdist worker (make test: --dist loadgroup) so that it is read once.
pytestmark = pytest.mark.xdist_group("test_choice_corpus.py")
_READINGS: dict[str, object] = {}


def _read(row):
    if row["id"] not in _READINGS:
        if "options" in row:
            _READINGS[row["id"]] = choice_reading(row["reply"], [tuple(o) for o in row["options"]]).value
        else:
            _READINGS[row["id"]] = yes_no_reading(row["reply"], row.get("question")).value
    return _READINGS[row["id"]]


def _figures(rows):
    committed = [r for r in rows if r["label"] is not None]
    none = [r for r in rows if r["label"] is None]
    got = {r["id"]: _read(r) for r in rows}
    read = sum(got[r["id"]] == r["label"] for r in committed)
    wrong = [r["id"] for r in committed if got[r["id"]] is not None and got[r["id"]] != r["label"]]
    false = [r["id"] for r in none if got[r["id"]] is not None]
    return read / len(committed), wrong, false, len(none)


def _own_bar(row) -> bool:
    """Splits held to their own first reads rather than to issue 12's 2% false-commit bar."""
    return row["split"].startswith("qwen_") or row["split"] == "blind8"


def test_corpus_is_what_the_issue_asks_for():
    assert len(ROWS) >= 200
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    written = [r for r in ROWS if r["source"] == "written"]
    assert len(written) * 10 < len(ROWS)                      # our own cases stay a minority
    assert sum(r["label"] is None for r in ROWS) >= 30        # replies that commit to nothing
    assert {r["suite"] for r in ROWS} >= {"multiverse", "charm"}
    models = Counter(r["model"] for r in ROWS if r["source"] == "beyond_one_world")
    assert set(models) == {"claude", "gemini2", "gemini2_thinking", "r1", "v3"}
    assert sum("</think>" in r["reply"] for r in ROWS) >= 40   # DeepSeek R1 reasoning blocks
    for r in ROWS:
        assert r["labelled_by"] and "split" in r, r["id"]
        if "options" in r:
            assert r["label"] is None or 0 <= r["label"] < len(r["options"]), r["id"]
        else:
            assert r["label"] in ("Yes", "No", None), r["id"]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["all", "dev", "heldout"])
def test_recall_wrong_and_false_commits(split):
    rows = ROWS if split == "all" else [r for r in ROWS if r["split"] == split]
    recall, wrong, false, n_none = _figures(rows)
    assert recall >= 0.95, recall
    assert wrong == []
    # issue 12's false-commit bar is for the corpus it was set on; Qwen's own multiverse replies (qwen_*
    # splits, 2 of their 4 false commits at first reads replies that pick and then undo the pick) and blind8
    # (issue 51; 1 false commit of 6 at its first read, no rule written from it) are held to their first reads
    # in the tests below
    _, _, false, n_none = _figures([r for r in rows if not _own_bar(r)])
    assert len(false) <= 0.02 * n_none, false


def test_blind_split_reads_nothing_wrongly():
    """The "blind" draw was labelled after the rules were written; its first reading had recall
    0.778 (docs/extraction.md). It must keep the safety bars; its recall is a regression guard."""
    recall, wrong, false, n_none = _figures([r for r in ROWS if r["split"] == "blind"])
    assert wrong == [] and false == []
    assert recall >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["choice", "yes_no"])
def test_no_wrong_reading_for_either_reader(reader):
    rows = [r for r in ROWS if ("options" in r) == (reader == "choice")]
    _, wrong, _, _ = _figures(rows)
    _, _, false, n_none = _figures([r for r in rows if not _own_bar(r)])   # see above
    assert wrong == [] and len(false) <= 0.02 * n_none


def _blind(split: str):
    """A blind split's figures: 60 replies, 12 per model, none shared with another split."""
    rows = [r for r in ROWS if r["split"] == split]
    assert len(rows) == 60 and {r["model"] for r in rows} == {"claude", "gemini2", "gemini2_thinking", "r1", "v3"}
    others = {r["id"] for r in ROWS if r["split"] != split}
    assert not others & {r["id"] for r in rows}
    return _figures(rows)


def test_second_blind_split_first_read_and_bars():
    """"blind2" (issue 22): 6 canon + 6 dilemma replies per model drawn before the issue-22 rules were
    written and labelled after them. First read: recall 0.889 (48 of 54), 1 wrong, 1 false commit
    of 6; two general rules from its misses then gave 0.944, 0 wrong, the same false commit (a
    reply that says "We're doing both." and later "the answer is B) ..., but with ... multitasking").
    Two more (a present-progressive act with the option's verb, a long option's act before its
    comma) read 53 of 54: 0.981."""
    recall, wrong, false, n_none = _blind("blind2")
    assert wrong == [] and len(false) <= 1
    assert recall >= 0.98


def test_third_blind_split_first_read_and_bars():
    """"blind3" (issue 22 section 4): 6 canon + 6 dilemma replies per model (sample_bow.py blind3, seed 23),
    drawn after the blind2 follow-up rules and labelled before the rules read them. First read:
    recall 0.909 (50 of 55), 1 wrong ("heroism is not about blind opposition—it is about ..." read as
    "Hero it is"), 0 false commits of 5. Three general rules from its misses then read 53 of 55, 0 wrong."""
    recall, wrong, false, n_none = _blind("blind3")
    assert wrong == [] and false == []
    assert recall >= 0.96


def test_fourth_blind_split_first_read_and_bars():
    """"blind4" (issue 22 section 4): 6 canon + 6 dilemma replies per model (sample_bow.py blind4, seed 24),
    drawn before the rules that followed blind3 were written, labelled after they were committed and
    before the rules read them. First read: recall 0.946 (53 of 56), 0 wrong, 0 false commits of 4 (the
    rules of main before that follow-up read the same). Two general rules from its misses then read 55
    of 56; the one left is "Thor chooses Option 2, rejecting Loki's scheme" where the scenario lists the
    other pole's option first (none by design, as blind3's "Option B: Stay in Metropolis")."""
    recall, wrong, false, n_none = _blind("blind4")
    assert wrong == [] and false == []
    assert recall >= 0.98


def test_fifth_blind_split_first_read_and_bars():
    """"blind5" (issue 39 section 3): 6 canon + 6 dilemma replies per model (sample_bow.py blind5, seed 25),
    drawn and committed before issue 39's rules were written, labelled after they were committed and
    before the rules read them. First read: recall 0.929 (52 of 56), 0 wrong, 1 false commit of 4 (the
    rules before issue 39 read the same). Two general rules from its misses ("find a way to save both"
    after a labelled pick is hope; a pick by words after answering "C" reads none) then read 53 of 56
    with no false commit, and a third ("My first approach... was to ...") 54 of 56; the two left commit
    only by narration or implication."""
    recall, wrong, false, n_none = _blind("blind5")
    assert wrong == [] and false == []
    assert recall >= 0.96


def test_sixth_blind_split_first_read_and_bars():
    """"blind6" (issue 39 section 3): 6 canon + 6 dilemma replies per model (sample_bow.py blind6, seed 26),
    drawn with the rules frozen at 3db54b6 and labelled before the rules read them; no rule was written
    from it. First read: recall 0.932 (55 of 59), 0 wrong, 0 false commits of 1: under the 0.95 bar,
    the four misses read none (three commit only by narration or an option's words, one letter
    disagrees with its option). One general rule then followed (`resolves_to_act`: "I have to save the
    bridge.", "We will accept Vision's help."), reading 57 of 59: 0.966, a figure of fit."""
    recall, wrong, false, n_none = _blind("blind6")
    assert wrong == [] and false == []
    assert recall >= 0.96


def test_seventh_blind_split_first_read_and_bars():
    """"blind7" (issue 39 section 3): 6 canon + 6 dilemma replies per model (sample_bow.py blind7, seed 27),
    drawn with the rules frozen at 71933df (resolves_to_act included) and labelled before the rules read
    them; no rule was written from it. First read: recall 0.966 (56 of 58), 0 wrong, 0 false commits of 2
    (the rules before resolves_to_act read it the same). A regression guard at the first read."""
    recall, wrong, false, n_none = _blind("blind7")
    assert wrong == [] and false == []
    assert recall >= 0.96


def _qwen(split: str):
    rows = [r for r in ROWS if r["split"] == split]
    assert len(rows) == 40 and {r["model"] for r in rows} == {"bundled:qwen2.5-coder-1.5b"}
    assert not {r["id"] for r in ROWS if r["split"] != split} & {r["id"] for r in rows}
    return _figures(rows)


def test_qwens_own_multiverse_replies_dev_split():
    """qwen_dev: 40 of Qwen2.5-Coder-1.5B's canon replies in issue 39's multiverse-bow run, labelled before the
    rules read them. First read: recall 0.800 (24 of 30), 0 wrong, 1 false commit of 10; the rules written from
    its misses (a2d5e20) read 28, 0 wrong, 0 false, and those after qwen_blind 29. Figures of fit."""
    recall, wrong, false, n_none = _qwen("qwen_dev")
    assert wrong == [] and false == []
    assert recall >= 0.96


def test_qwens_own_multiverse_replies_first_blind_split():
    """qwen_blind: 40 more of the same run, drawn before the qwen_dev rules, labelled after them. First read
    (rules of a2d5e20): recall 0.677 (21 of 31), 1 wrong, 1 false commit of 9; the rules before a2d5e20 read it
    the same. The rules then written from its misses (1e2b840) read 25, 0 wrong, 0 false: fit, not
    generalisation (qwen_blind2 measures that)."""
    recall, wrong, false, n_none = _qwen("qwen_blind")
    assert wrong == [] and false == []
    assert recall >= 0.8


def test_qwens_own_multiverse_replies_second_blind_split():
    """qwen_blind2: 40 records of the same run at line positions pre-registered (0cc0de1) before the rules of
    1e2b840 were written, labelled after them. First read (1e2b840): recall 0.862 (25 of 29), 0 wrong, 2 false
    commits of 11; the rules before this work (b988ea5) read 20, those of a2d5e20 23, both with the same two
    false commits. One rule followed from them (one option stated beside most of another's own words in a
    sentence of its own): one false commit left, as fit."""
    recall, wrong, false, n_none = _qwen("qwen_blind2")
    assert wrong == [] and len(false) <= 1
    assert recall >= 0.86


def test_qwens_own_multiverse_replies_third_blind_split():
    """qwen_blind3: 40 records at line positions 301-600 pre-registered (a32fd81, seed 2029) before
    the rules of f91fe77 and 50e394b were written, labelled after them. First read (50e394b): recall 0.958 (23 of
    24), 0 wrong, 2 false commits of 16, both replies that pick an option and then undo it ("I would choose
    option D ... Ultimately, the decision will depend on ..."); the rules before this work (b988ea5) read 18,
    0 wrong, 3 false commits. No rule was written from it."""
    recall, wrong, false, n_none = _qwen("qwen_blind3")
    assert wrong == [] and len(false) <= 2
    assert recall >= 0.95


def test_eighth_blind_split_first_read_and_bars():
    """"blind8" (issue 51 item 7): 6 canon + 6 dilemma replies per model (sample_bow.py blind8, seed 28), drawn
    before issue 51's rules were written (819c953), labelled after they were committed (adfdcc0) and before the
    rules read them (48aec16); no rule was written from it. First read: recall 0.944 (51 of 54), 0 wrong, 1
    false commit of 6, one reply under the 0.95 bar; the rules before issue 51 (a38d783) read it the same. Two
    misses commit only in narration, one picks B with A on a condition; the false commit says "I choose to be a
    hero" and acts out the villain's option."""
    recall, wrong, false, n_none = _blind("blind8")
    assert wrong == [] and len(false) <= 1
    assert recall >= 0.94


def test_ninth_blind_split_first_read_and_bars():
    """"blind9" (issue 51 item 7): 6 canon + 6 dilemma replies per model (sample_bow.py blind9, seed 29), drawn after
    blind8's first read (ed23918), kept unread while one rule followed from blind8 (535dbc5, a label right after a
    modal), labelled after it was committed and before the rules read them (ede772d); no rule was written from it.
    First read: recall 0.982 (55 of 56), 0 wrong, 0 false commits of 4; the rules before 535dbc5 and before issue 51
    (a38d783) read it the same. The miss commits only in narration ("We resurrect Superman.")."""
    recall, wrong, false, n_none = _blind("blind9")
    assert wrong == [] and false == []
    assert recall >= 0.98


CUT = Path(__file__).parent / "data" / "replies" / "charm_official_cut" / "labels.jsonl"
CUT_BLIND = CUT.with_name("blind_labels.jsonl")


def _official_run_records(ids) -> dict:
    import os

    run = os.environ.get("ROLEBOUND_CHARM_OFFICIAL_RUN")
    if not run or not (Path(run) / "records.jsonl").exists():
        pytest.skip("set ROLEBOUND_CHARM_OFFICIAL_RUN to a charm-official run folder rebuilt from bench/carried")
    records = {}
    for line in (Path(run) / "records.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("call_id") in ids and r.get("role") == "model":
            records[r["call_id"]] = r
    assert set(records) == set(ids)
    return records


def test_charm_official_cut_replies_read_as_an_answer_only_where_they_commit():
    """The 66 replies of charm-official that the 256-token cap cut and the rules of a38d783 read as an answer,
    labelled by hand (21 commit, 45 do not: option-by-option reviews cut before any decision). Today's rules
    read the 21 as labelled and none of the 45. Needs the run rebuilt from bench/carried (docs/extraction.md)."""
    labels = {json.loads(x)["call_id"]: json.loads(x) for x in CUT.read_text(encoding="utf-8").splitlines() if x.strip()}
    assert len(labels) == 66 and sum(r["label"] is None for r in labels.values()) == 45
    records = _official_run_records(labels)
    wrong = []
    for cid, lab in labels.items():
        r = records[cid]
        assert r["finish_reason"] == "length"
        got = choice_reading(r["response"], [tuple(o) for o in r["meta"]["extract"]["options"]]).value
        if got != lab["label"]:
            wrong.append((cid, lab["label"], got))
    assert wrong == []


def test_blind9_cut_replies_of_charm_official_read_as_labelled():
    """blind9's 30 cut charm-official replies (charm_official_cut/blind_ids.txt: seed 29, of the 766 cut choice
    replies outside the 66), drawn with blind9 and labelled before the rules read them: all 30 commit to none
    (reviews cut before a decision). First read: 0 of 30 read as an answer. Needs the rebuilt run, as above."""
    labels = {json.loads(x)["call_id"]: json.loads(x) for x in CUT_BLIND.read_text(encoding="utf-8").splitlines() if x.strip()}
    ids = [x for x in CUT.with_name("blind_ids.txt").read_text(encoding="utf-8").splitlines() if x and not x.startswith("#")]
    assert sorted(ids) == sorted(labels) and len(labels) == 30 and not set(labels) & {
        json.loads(x)["call_id"] for x in CUT.read_text(encoding="utf-8").splitlines() if x.strip()}
    records = _official_run_records(labels)
    got = {cid: choice_reading(r["response"], [tuple(o) for o in r["meta"]["extract"]["options"]]).value
           for cid, r in records.items()}
    assert all(records[cid]["finish_reason"] == "length" for cid in labels)
    assert [(cid, labels[cid]["label"], v) for cid, v in got.items() if v != labels[cid]["label"]] == []
