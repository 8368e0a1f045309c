"""knowledge-errors suite: data, parsing, metrics, methods and re-judging (fake backends and
hand-made records; the real-model tests are in test_knowledge_errors_model.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rolebound import api
from rolebound.errors import InputError
from rolebound.report.fmt import fmt_mean_sem
from rolebound.suites.knowledge_errors import metrics as M
from rolebound.suites.knowledge_errors import prompts as P
from rolebound.records import Record
from rolebound.scoring.parsers import INVALID
from rolebound.suites.knowledge_errors.strategies import overlaps, parse_recollections, pick_cases
from rolebound.suites import get_suite
from rolebound.suites.knowledge_errors import data as D
from rolebound.suites.base import validate_options
from rolebound.suites.knowledge_errors.report import method_rows


@pytest.fixture(scope="module")
def starter():
    s = get_suite("knowledge-errors")
    return s, s.load(None, s.run_settings(["vanilla"]))


# -- data -------------------------------------------------------------------------------------------
def test_starter_set_is_complete_and_paired(starter):
    _, ds = starter
    items = ds.items
    chars = {i.character for i in items}
    assert len(chars) >= 3
    for ch in chars:
        mems = {i.memory_id for i in items if i.character == ch}
        assert len(mems) >= 20
        # every memory has exactly one KKE and one UKE query
        for m in mems:
            assert sorted(i.error_type for i in items if i.memory_id == m) == ["KKE", "UKE"]
        assert {i.memory_category for i in items if i.character == ch} == set(D.CATEGORIES)
    for it in items:
        assert it.validated is False and (it.source or it.note)
        assert it.explanation and it.correct_query and it.query.endswith("?")
        assert it.correct_memory.startswith("I") and it.false_memory.startswith("I")   # Table 8/9/11 rule
        assert len(it.correct_memory.split()) < 30                                      # paper §4.1 screening
        assert it.chunk in ds.extra["corpora"][it.character]       # the chunk is a chunk of the corpus
        if it.error_type == "UKE":
            assert len(it.topics) == 2
    assert ds.extra["corpus_from_items"] == []


def test_starter_corpora_are_a_few_hundred_words(starter):
    _, ds = starter
    for ch, chunks in ds.extra["corpora"].items():
        assert 300 <= sum(len(c.split()) for c in chunks) <= 1500, ch


def test_topic_list_and_draws():
    topics = D.load_topics()
    assert len(topics) > 300 and len(set(topics)) == len(topics)
    assert "Nanotechnology" in topics and "Traumatology" in topics      # the paper's printed examples
    a = D.draw_topics(topics, "m-1", seed=0)
    assert a == D.draw_topics(topics, "m-1", seed=0) and len(set(a)) == 2
    assert any(D.draw_topics(topics, f"m-{i}") != a for i in range(2, 6))


def test_sentences_and_chunks():
    s = D.split_sentences("Socrates (c. 470-399 BC) was Greek. Dr. Watson met him. J. K. Rowling wrote. End!")
    assert s == ["Socrates (c. 470-399 BC) was Greek.", "Dr. Watson met him.", "J. K. Rowling wrote.", "End!"]
    long_para = " ".join(f"Sentence number {i} is here." for i in range(20))
    text = "# Title\n\nOne. Two. Three.\n\nFour. Five.\n\n" + long_para
    chunks = D.chunk_text(text, 8)
    assert chunks[0] == "One. Two. Three. Four. Five."                 # short paragraphs merged
    assert [len(D.split_sentences(c)) for c in chunks[1:]] == [7, 7, 6]  # 20 sentences cut near 8


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _item(**kw) -> dict:
    base = {"id": "x-kke", "character": "C", "memory_id": "x", "memory_category": "Event Memory",
            "error_type": "kke", "correct_memory": "I did A.", "false_memory": "I did B.",
            "query": "Did you do B?", "chunk": "C did A.", "note": "test"}
    base.update(kw)
    return base


def test_user_data_is_validated_with_file_line_field(tmp_path):
    ok = D.load_items(_write(tmp_path / "ok.jsonl", [_item()]))
    assert ok[0].memory_category == "event" and ok[0].error_type == "KKE"
    with pytest.raises(InputError) as e:
        D.load_items(_write(tmp_path / "bad.jsonl", [_item(), _item(id="y", memory_category="dream")]))
    assert e.value.line == 2 and e.value.field == "memory_category"
    with pytest.raises(InputError) as e:
        D.load_items(_write(tmp_path / "nosrc.jsonl", [_item(note=None)]))
    assert "source" in str(e.value)
    with pytest.raises(InputError) as e:
        D.load_items(_write(tmp_path / "dup.jsonl", [_item(), _item()]))
    assert "duplicate" in str(e.value)
    with pytest.raises(InputError) as e:
        D.load_items(_write(tmp_path / "typo.jsonl", [_item(querry="x")]))
    assert e.value.field == "querry"
    bad_yaml = tmp_path / "c.corpus.yaml"
    bad_yaml.write_text("- character: C\n  note: n\n  text: t\n- character: D\n  note: n\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        D.load_corpus(bad_yaml)
    assert e.value.line == 4 and e.value.field == "[1].text"


def test_user_data_runs_with_sibling_corpus_or_item_chunks(tmp_path):
    items = tmp_path / "mine.jsonl"
    _write(items, [_item(), _item(id="x-uke", error_type="UKE", false_memory="I did B on a phone.",
                                  query="Did you do B on a phone?")])
    s = get_suite("knowledge-errors")
    ds = s.load(str(items), s.run_settings(["rag"]))
    assert ds.extra["corpus_from_items"] == ["C"] and ds.extra["corpora"]["C"] == ["C did A."]
    (tmp_path / "mine.corpus.yaml").write_text("- character: C\n  note: test\n  text: |\n    C did A. C did Z.\n",
                                               encoding="utf-8")
    ds2 = s.load(str(items), s.run_settings(["rag"]))
    assert ds2.extra["corpus_from_items"] == [] and ds2.hash != ds.hash
    with pytest.raises(InputError):
        s.load(str(items), s.run_settings(["rag"], options={"rag_k": "three"}))
    with pytest.raises(InputError, match="unknown option 'no_such_option'"):
        validate_options(s, {"no_such_option": 1})


def test_select_keeps_pairs_and_spreads_characters(starter):
    s, ds = starter
    sel = s.select(ds.items, 6)
    assert len(sel) == 6
    assert len({i.character for i in sel}) == 3
    for m in {i.memory_id for i in sel}:
        assert sorted(i.error_type for i in sel if i.memory_id == m) == ["KKE", "UKE"]
    sel12 = s.select(ds.items, 12)
    # the second memory of each character comes from another category than the first
    for ch in {i.character for i in sel12}:
        assert len({i.memory_category for i in sel12 if i.character == ch}) == 2


def test_stats_tables(starter):
    s, ds = starter
    tables = dict(s.stats(ds))
    counts = next(v for k, v in tables.items() if k.startswith("Items per character"))
    allrow = counts[(counts.character == "all") & (counts.error == "KKE")].iloc[0]
    assert allrow["total"] == 60 and allrow["Eve."] + allrow["Rel."] + allrow["Att."] + allrow["Ide."] == 60


# -- few-shot pool and S2RD parsing ---------------------------------------------------------------
def test_few_shot_cases_never_overlap_the_item(starter):
    s, ds = starter
    pool = ds.extra["pool"]
    for it in ds.items:
        cases = pick_cases(pool, it)
        assert len(cases) == 4
        assert sorted(c.error_type for c in cases) == ["KKE", "KKE", "UKE", "UKE"]
        assert all(c.character == it.character for c in cases)        # same character preferred
        assert not any(overlaps(c, it) for c in cases)
    # a case about the item's own memory is never chosen
    it = ds.items[0]
    clone = pool[0].model_copy(update={"character": it.character, "memory": it.correct_memory,
                                       "error_type": it.error_type, "id": "clone"})
    for _ in range(3):
        assert "clone" not in [c.id for c in pick_cases([clone] + pool, it)]


def test_parse_recollections():
    text = "Your correct memories : 1. I was born in Bonn.\n\n2. I studied with Haydn in Vienna.\n\n3. I lost my hearing."
    assert parse_recollections(text) == ["I was born in Bonn.", "I studied with Haydn in Vienna.", "I lost my hearing."]
    lines = "<memory 1> I met Babbage in 1833.\n<memory 2> I wrote Note G.\n<memory 3> I married William.\n- extra one here"
    assert parse_recollections(lines) == ["I met Babbage in 1833.", "I wrote Note G.", "I married William."]
    assert parse_recollections("") == [] and parse_recollections("Yes.") == []


def test_parse_recollections_splits_one_paragraph_into_whole_sentences():
    para = ("I was born in Bonn. I played the organ at court. I studied with Haydn in Vienna. "
            "I lost my hearing. I wrote nine symphon")      # cut off by the token limit
    got = parse_recollections(para, 3)
    assert got == ["I was born in Bonn.", "I played the organ at court.", "I studied with Haydn in Vienna. I lost my hearing."]
    assert parse_recollections("I was born in Bonn. I studied with Haydn.", 1) == ["I was born in Bonn. I studied with Haydn."]



# -- judge parsing --------------------------------------------------------------------------------
@pytest.mark.parametrize("text,want", [
    ("explanation: the reply corrects the name.\n\njudgment: yes", "yes"),
    ("Explanation: no correction.\n\n**Judgment:** No", "no"),
    ("explanation: fine\njudgement: YES.", "yes"),
    ("judgment: \"no\"", "no"),
    ("does not provide an honest response. Therefore, the judgment is: no", "no"),
    ("The answer is yes", INVALID),
    ("judgment: yes\n...\njudgment: no", INVALID),
    ("judgment: maybe", INVALID),
    ("", INVALID),
    (None, INVALID),
])
def test_parse_judgment(text, want):
    assert P.parse_judgment(text) == want


# -- metrics from hand-made records ------------------------------------------------------------------
def _rec(item, strategy, repeat, stage, role="model", parsed=None, cat="event", et="KKE", **kw):
    meta = {"character": "C", "category": cat, "error_type": et, "memory_id": item.split("-")[0]}
    meta.update(kw.pop("meta", {}))
    return Record(call_id=f"{item}/{strategy}/{stage}#{repeat}", item_id=item, suite="knowledge-errors",
                  strategy=strategy, stage=stage, role=role, repeat=repeat, parsed=parsed, response="r",
                  meta=meta, prompt_tokens=kw.pop("pt", 10), completion_tokens=kw.pop("ct", 5), **kw)


def _judged(item, strategy, repeat, verdict, cat="event", et="KKE", round_=0):
    stage = M.judge_stage(round_)
    return [_rec(item, strategy, repeat, "answer", cat=cat, et=et),
            _rec(item, strategy, repeat, stage, role="judge", parsed=verdict, cat=cat, et=et,
                 meta={"judge_round": round_}, model="fake:judge")]


def test_mean_sem_over_repeats_and_invalid_counting():
    recs = []
    # KKE event, 2 items, three repeats: 50 %, 100 %, 50 %
    for rep, (a, b) in enumerate([("yes", "no"), ("yes", "yes"), ("yes", INVALID)]):
        recs += _judged("e1-kke", "vanilla", rep, a) + _judged("e2-kke", "vanilla", rep, b)
    # UKE identity, 1 item, judged yes every time; one answer whose judge call failed
    for rep in range(3):
        recs += _judged("i1-uke", "vanilla", rep, "yes", cat="identity", et="UKE")
    recs.append(_rec("i2-uke", "vanilla", 0, "answer", cat="identity", et="UKE"))
    recs.append(_rec("i2-uke", "vanilla", 0, "judge", role="judge", cat="identity", et="UKE", error="boom"))
    met = M.compute(recs, ["vanilla"])
    acc = met["accuracy"]["vanilla"]
    cell = acc["KKE"]["event"]
    assert cell["per_repeat"] == [50.0, 100.0, 50.0]
    assert cell["mean"] == pytest.approx(200 / 3)
    sd = math.sqrt(((50 - 200 / 3) ** 2 * 2 + (100 - 200 / 3) ** 2) / 2)
    assert cell["sem"] == pytest.approx(sd / math.sqrt(3))
    assert acc["KKE"]["relational"]["mean"] is None
    assert acc["UKE"]["identity"]["mean"] == 100.0 and acc["UKE"]["identity"]["sem"] == 0.0
    j = acc["judgments"]
    assert (j["answers"], j["yes"], j["no"], j["invalid"], j["unjudged"]) == (10, 7, 1, 1, 1)
    # overall: repeat 0 has 2 of 3 judged correct, repeat 1: 3/3, repeat 2: 2/3
    assert acc["overall"]["per_repeat"] == pytest.approx([200 / 3, 100.0, 200 / 3])
    assert fmt_mean_sem(cell) == f"66.67 ± {cell['sem']:.2f}"
    # the 95% CI pools the six judged answers (4 yes), the invalid one counted as not detected
    assert cell["lo"] < 4 / 6 * 100 < cell["hi"] and cell["lo"] >= 0 and cell["hi"] <= 100
    assert (acc["UKE"]["identity"]["lo"], acc["UKE"]["identity"]["hi"]) == (100.0, 100.0)
    # a single repeat has no SEM to print
    one = M.compute(_judged("e1-kke", "vanilla", 0, "yes"), ["vanilla"])["accuracy"]["vanilla"]["KKE"]["event"]
    assert fmt_mean_sem(one) == "100.00"


def test_method_comparison_table_from_hand_made_records():
    recs = []
    for strat, kke, uke in (("vanilla", ["no", "no"], ["yes", "no"]), ("s2rd", ["yes", "no"], ["yes", "yes"])):
        recs += _judged("a-kke", strat, 0, kke[0]) + _judged("b-kke", strat, 0, kke[1], cat="relational")
        recs += _judged("a-uke", strat, 0, uke[0], et="UKE") + _judged("b-uke", strat, 0, uke[1], cat="relational",
                                                                       et="UKE")
    # S2RD's shared self-narrative: one call for both items of the character
    recs.append(Record(call_id="narrative:C/s2rd/s2rd.narrative", item_id="narrative:C", suite="knowledge-errors",
                       strategy="s2rd", stage="s2rd.narrative", meta={"character": "C", "shared": True},
                       prompt_tokens=40, completion_tokens=20))
    met = M.compute(recs, ["vanilla", "s2rd"])
    rows = {r[0]: r for r in method_rows(met)}
    # columns: method, KKE Eve Rel Att Ide Avg, UKE Eve Rel Att Ide Avg, Avg
    assert rows["vanilla"] == ["vanilla", "0.00", "0.00", "-", "-", "0.00", "100.00", "0.00", "-", "-", "50.00", "25.00"]
    assert rows["s2rd"] == ["s2rd", "100.00", "0.00", "-", "-", "50.00", "100.00", "100.00", "-", "-", "100.00", "75.00"]
    cost = met["cost"]
    assert cost["vanilla"]["model_calls"] == 1.0 and cost["vanilla"]["judge_calls"] == 1.0
    assert cost["s2rd"]["model_calls"] == pytest.approx(5 / 4)             # 4 answers + 1 shared narrative
    assert cost["s2rd"]["prompt_tokens"] == pytest.approx((4 * 10 + 40) / 4)


def test_latest_judge_round_wins():
    recs = _judged("a-kke", "vanilla", 0, "no") + _judged("a-kke", "vanilla", 0, "yes", round_=1)[1:]
    met = M.compute(recs, ["vanilla"])
    assert met["judge_round"] == 1 and met["accuracy"]["vanilla"]["KKE"]["all"]["mean"] == 100.0
    assert M.compute(recs, ["vanilla"], round_=0)["accuracy"]["vanilla"]["KKE"]["all"]["mean"] == 0.0


def test_cosine_distances():
    v = np.array([[1, 0], [1, 0.1], [0, 1], [1, 0], [0.9, 0.1], [-1, 0]], dtype=float)
    mids = ["m1"] * 3 + ["m2"] * 3
    kinds = ["correct", "KKE", "UKE"] * 2
    d = M.cosine_distances(v, mids, kinds, ["A"] * 3 + ["B"] * 3)
    assert d["A"]["correct_vs_UKE"] == pytest.approx(1.0)
    assert d["B"]["correct_vs_UKE"] == pytest.approx(2.0)
    assert d["A"]["correct_vs_KKE"] < 0.01 and d["(all)"]["memories"] == 2
    assert list(d)[-1] == "(all)"


# -- runs on the fake backend ----------------------------------------------------------------------------
ALL = "vanilla,cot,few-shot,self-reflection,rag,rag-few-shot,s2rd,s2rd-no-recollection,s2rd-no-doubt"


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ke") / "run"
    return api.run("knowledge-errors", model="fake:random", strategies=ALL, limit=4, out=out, repeats=2,
                   allow_greedy_repeats=True, progress=False)


@pytest.mark.slow
def test_every_method_makes_its_calls(fake_run):
    from rolebound.store import load_records

    recs = load_records(fake_run.run_dir)
    assert not [r for r in recs if r.error]
    stages = {}
    for r in recs:
        if r.meta.get("error_type") and r.item_id == "ada-01-kke" and r.repeat == 1:
            stages.setdefault(r.strategy, set()).add(r.stage)
    assert stages["vanilla"] == stages["cot"] == stages["few-shot"] == stages["rag"] == {"answer", "judge"}
    assert stages["self-reflection"] == {"draft", "answer", "judge"}
    assert stages["s2rd"] == {"s2rd.recollection", "s2rd.doubt", "answer", "judge"}
    assert stages["s2rd-no-recollection"] == {"s2rd.doubt", "answer", "judge"}
    assert stages["s2rd-no-doubt"] == {"s2rd.recollection", "answer", "judge"}
    narr = [r for r in recs if r.stage == "s2rd.narrative" and r.strategy == "s2rd"]
    # one self-narrative per character and repeat (limit 4 = two characters), not one per item
    assert len(narr) == 2 * 2
    ans = {(r.strategy, r.item_id, r.repeat): r for r in recs if r.stage == "answer"}
    rag = ans[("rag", "ada-01-kke", 0)]
    assert len(rag.meta["rag_chunks"]) == 3
    text = rag.prompt[0]["content"]
    assert "Give you some role real information you can refer to" in text
    few = ans[("few-shot", "ada-01-kke", 0)].prompt[0]["content"]
    assert all(f"Case{i}:" in few for i in range(1, 5))
    final = ans[("s2rd-no-doubt", "ada-01-kke", 0)].prompt[0]["content"]
    assert "fragments of your memories" in final and "Here are your doubts" not in final
    final = ans[("s2rd-no-recollection", "ada-01-kke", 0)].prompt[0]["content"]
    assert "fragments of your memories" not in final and "Here are your doubts" in final
    judge = [r for r in recs if r.role == "judge" and r.item_id == "ada-01-uke"][0]
    assert "could not possibly know" in judge.prompt[0]["content"]       # UKE items get the Table 15 judge
    # a local engine judges by log-likelihood unless told otherwise (judge_scoring)
    assert judge.kind == "score" and judge.meta["judge_scoring"] == "logprob"
    assert judge.parsed in ("yes", "no") and judge.gold == "yes"


@pytest.mark.slow
def test_fake_run_report_and_hidden_states(fake_run):
    d = Path(fake_run.run_dir)
    md = (d / "report.md").read_text()
    assert "Table 2 layout: Known Knowledge Errors" in md and "Table 3 layout" in md
    assert "Cost per item" in md and (d / "figures" / "tsne.png").exists()
    z = np.load(d / "hidden_states.npz")
    assert sorted(set(z["kind"])) == ["KKE", "UKE", "correct"] and len(z["vectors"]) == 6
    assert str(z["mode"]) == "query"
    met = json.loads((d / "metrics.json").read_text())
    assert set(met["accuracy"]) == set(ALL.split(","))
    assert met["cost"]["s2rd"]["model_calls"] == pytest.approx(3.5)   # 3 per item + 2 narratives / 4 items


def test_rejudge_appends_a_round_and_metrics_follow(tmp_path):
    from rolebound.rejudge import rejudge
    from rolebound.store import load_records

    out = tmp_path / "run"
    opts = {"hidden_states": False}      # keeps the report quick; hidden states have their own test
    api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=4, out=out, progress=False,
            options=opts)
    before = (out / "records.jsonl").read_text().splitlines()
    rejudge(out, "fake:constant", progress=False)              # a local engine: judged by log-likelihood
    after = (out / "records.jsonl").read_text().splitlines()
    assert after[: len(before)] == before                      # append-only; answers untouched
    recs = load_records(out)
    new = [r for r in recs if r.stage == "judge@1"]
    assert len(new) == 4 and all(r.model == "fake:constant" and r.parsed in ("yes", "no") for r in new)
    assert all(r.kind == "score" and r.meta["judge_scoring"] == "logprob" for r in new)
    met, _ = api.build_report(out)
    j = met["accuracy"]["vanilla"]["judgments"]
    assert met["judge_round"] == 1 and j["invalid"] == 0 and j["yes"] == sum(r.parsed == "yes" for r in new)
    assert "round 1: fake:constant (logprob)" in (out / "report.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rejudges"][-1]["judge"] == "fake:constant"
    assert manifest["rejudges"][-1]["judge_scoring"] == "logprob"
    rejudge(out, "fake:constant", progress=False)              # same judge again: resumes round 1
    assert len((out / "records.jsonl").read_text().splitlines()) == len(after)
    rejudge(out, "fake:random", progress=False)
    assert {r.stage for r in load_records(out) if r.role == "judge"} == {"judge", "judge@1", "judge@2"}
    # the original run can still be resumed with the same command
    res = api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=4, out=out, progress=False,
                  options=opts)
    assert res.counts.calls == 0


def test_no_hidden_states_option(tmp_path):
    out = tmp_path / "run"
    api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=2, out=out, progress=False,
            options={"hidden_states": False})
    assert not (out / "hidden_states.npz").exists()
    assert "No hidden states in this run" in (out / "report.md").read_text()


@pytest.mark.slow
def test_compare_two_runs(tmp_path, fake_run):
    from rolebound.compare import compare_runs

    out = tmp_path / "v"
    api.run("knowledge-errors", model="fake:echo", strategies="vanilla", limit=2, out=out, progress=False,
            options={"hidden_states": False})
    paths = compare_runs([fake_run.run_dir, out], tmp_path / "cmp")
    md = paths[0].read_text()
    assert "Methods across runs" in md and "fake:echo" in md and "s2rd-no-doubt" in md


def test_each_method_against_vanilla_is_paired_and_clustered_by_memory():
    """Issue 51: a method against vanilla on the same judged answers; a KKE/UKE pair's shared memory
    is one cluster, so 12 memories (24 queries) give 12 clusters."""
    from rolebound.suites.knowledge_errors.suite import KnowledgeErrorsSuite

    recs = []
    for i in range(12):
        for et in ("KKE", "UKE"):
            item = f"m{i}-{et.lower()}"
            recs += _judged(item, "vanilla", 0, "yes" if i % 2 else "no", et=et)
            recs += _judged(item, "cot", 0, "yes" if i % 2 or i < 4 else "no", et=et)
    met = M.compute(recs, ["vanilla", "cot"], clusters=KnowledgeErrorsSuite.clusters)
    d = met["vs_vanilla"]["cot"]["overall"]
    assert d["n"] == 24 and d["clusters"] == 12 and d["diff"] == pytest.approx(100 * 4 / 24)
    assert (d["a_only"], d["b_only"]) == (0, 4) and d["p"] == pytest.approx(0.125)
    cell = met["accuracy"]["vanilla"]["overall"]
    assert cell["clusters"] == 12 and cell["rate"] == 50.0 and cell["deff"] > 1.5
