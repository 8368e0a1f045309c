"""The capability suite end to end: fake-backend runs, data validation, backend checks, the
importer, resume, and one run through the real bundled model."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from rolebound import api
from rolebound.errors import CapabilityError, InputError
from rolebound.importers import all_importers
from rolebound.suites.capability.boxed import parse_boxed_letter
from rolebound.store import load_records
from rolebound.suites.capability.suite import CapabilitySuite
from rolebound.suites.capability.data import BANK_FILE, ROLES_FILE

from helpers import assert_refused_without_provenance, needs_script

ALL = "identity,description,cot,guideline,explicit-idk,syllabus,injection,injection-syllabus,no-role"


def write_items(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def item(i: int, level: str = "elementary", **kw) -> dict:
    return {"id": f"q{i}", "level": level, "subject": "mathematics", "question": f"What is {i} + 1?",
            "options": [str(i), str(i + 1), str(i + 2), str(i + 3)], "answer": "B", "note": "test fixture", **kw}


# -- runs with the fake backend ----------------------------------------------------------------
@pytest.mark.slow
def test_fake_run_covers_every_variant_role_and_question(tmp_path):
    res = api.run("capability", model="fake:random", strategies=ALL, limit=8, out=tmp_path / "run",
                  options={"roles": "kindergarten,primary,college", "judge": True}, progress=False)
    recs = load_records(res.run_dir)
    answers = [r for r in recs if r.role == "model"]
    judges = [r for r in recs if r.role == "judge"]
    # 8 questions x 3 roles x 8 variants, plus 8 no-role answers; one judge call per role answer
    assert len(answers) == 8 * 3 * 8 + 8
    assert len(judges) == 8 * 3 * 8
    assert Counter(r.meta["level"] for r in answers if r.strategy == "no-role") == \
        {"elementary": 2, "intermediate": 2, "high_school": 2, "a_level": 2}
    for r in answers:
        assert r.parsed == parse_boxed_letter(r.response)
        assert r.correct == (r.parsed == r.gold)
        if r.strategy in ("injection", "injection-syllabus"):
            assert r.kind == "complete" and isinstance(r.prompt, str)
            assert r.prompt.endswith("So, my role is") and "<|assistant|><think>\nOkay, I am " in r.prompt
        else:
            assert r.kind == "chat"
        if r.strategy != "no-role":
            ceiling = {"kindergarten": -1, "primary": 0, "college": 3}[r.meta["role"]]
            assert r.meta["in_role"] == (r.meta["level_rank"] <= ceiling)
    assert all(j.meta["judged"].endswith("/answer." + j.meta["role"]) for j in judges)
    m = json.loads((res.run_dir / "metrics.json").read_text())
    assert set(m["by_strategy"]) == set(ALL.split(",")) - {"no-role"}
    assert m["no_role"]["n"] == 8
    assert set(m["deltas"]) == set(ALL.split(",")) - {"no-role", "identity"}
    for name in ("heatmap", "accuracy_by_role", "deltas"):
        assert (res.run_dir / "figures" / f"{name}.png").stat().st_size > 1000
    md = (res.run_dir / "report.md").read_text()
    assert "Table 3" in md and "figures/heatmap.png" in md and "Answer extraction" in md


@pytest.mark.slow
def test_metrics_are_a_pure_function_of_the_records(tmp_path):
    res = api.run("capability", model="fake:random", strategies="identity,injection", limit=4,
                  out=tmp_path / "run", options={"roles": "primary,teacher"}, progress=False)
    before = (res.run_dir / "metrics.json").read_text()
    api.build_report(res.run_dir)
    assert (res.run_dir / "metrics.json").read_text() == before


@pytest.mark.slow
def test_resume_makes_no_new_calls(tmp_path):
    kw = dict(model="fake:random", strategies="identity,no-role", limit=4, out=tmp_path / "run",
              options={"roles": "primary"}, progress=False)
    first = api.run("capability", **kw)
    again = api.run("capability", **kw)
    assert first.counts.calls == 4 + 4 and again.counts.calls == 0 and again.counts.resumed == 8


@pytest.mark.slow
def test_a_failed_role_call_is_recorded_and_retried_on_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLEBOUND_FAKE_FAIL", "You are a college student")
    kw = dict(model="fake:random", strategies="identity", limit=2, out=tmp_path / "run",
              options={"roles": "primary,college"}, progress=False)
    res = api.run("capability", **kw)
    assert res.counts.errors == 2 and res.counts.items_failed == 2
    assert sum(1 for r in load_records(res.run_dir) if r.error is None) == 2      # primary answers kept
    monkeypatch.delenv("ROLEBOUND_FAKE_FAIL")
    again = api.run("capability", **kw)
    assert again.counts.calls == 2 and again.counts.resumed == 2


def test_default_run_is_a_small_balanced_sample():
    def pick(limit=None, **kw):
        # one suite object for every run: what a run needs is in its settings, never on the suite
        settings = s.run_settings(["identity"], limit=limit, **kw)
        ds = s.load(None, settings)
        return ds, s.select(ds.items, limit, settings)

    s = CapabilitySuite()
    ds, picked = pick()
    assert len(picked) == 4 * 2 and len(ds.items) >= 160
    assert Counter(i.level for i in picked) == {"elementary": 2, "intermediate": 2, "high_school": 2, "a_level": 2}
    assert set(Counter(i.subject for i in picked)) == {"mathematics", "science", "language"}
    # another model gets the whole starter bank (the run's settings name the backend)
    ds4, picked4 = pick(backend="openai")
    assert len(picked4) == len(ds4.items)
    # the demo model keeps the small sample
    assert len(pick(backend="bundled", demo=True)[1]) == 8
    assert [i.level for i in pick(6)[1]] == ["elementary", "intermediate", "high_school", "a_level",
                                             "elementary", "intermediate"]
    ds3, picked3 = pick(options={"per_level": "all"})
    assert len(picked3) == len(ds3.items)
    assert len(s.select(ds3.items, None)) == len(ds3.items)     # no run: no per-level cap
    assert not any(k.startswith(("cfg", "roles", "per_level")) for k in vars(s))


@pytest.mark.slow
def test_rejudge_scores_an_existing_run_without_touching_answers(tmp_path, monkeypatch):
    from rolebound.models import fake

    res = api.run("capability", model="fake:random", strategies="identity,injection,no-role", limit=4,
                  out=tmp_path / "run", options={"roles": "kindergarten,college"}, progress=False)
    answers_before = [r for r in load_records(res.run_dir) if r.role == "model"]
    monkeypatch.setattr(fake, "POOL", ["RV: 2\nC: 1\nRC: 0"])
    from rolebound.rejudge import rejudge

    n = rejudge(res.run_dir, "fake:random", progress=False).answers
    assert n == 4 * 2 * 2                                   # role-prompted answers only, not no-role
    recs = load_records(res.run_dir)
    assert [r for r in recs if r.role == "model"] == answers_before
    judges = [r for r in recs if r.role == "judge"]
    assert len(judges) == n and {r.parsed["RV"] for r in judges} == {2}
    metrics, _ = api.build_report(res.run_dir)
    mac = metrics["by_strategy"]["injection"]["macro"]
    assert (mac["RV"]["mean"], mac["C"]["mean"], mac["RC"]["mean"]) == (2.0, 1.0, 0.0)
    assert api.load_manifest(res.run_dir).rejudges[0]["answers"] == n
    # a second judge is a new round: the metrics read it, the first round's verdicts stay as history
    monkeypatch.setattr(fake, "POOL", ["RV: 0\nC: 0\nRC: 2"])
    rejudge(res.run_dir, "fake:echo", progress=False)
    metrics, _ = api.build_report(res.run_dir)
    assert metrics["by_strategy"]["identity"]["judge_invalid"] == 8     # echo repeats the prompt: unreadable
    assert metrics["by_strategy"]["injection"]["macro"]["RV"]["mean"] is None
    recs = load_records(res.run_dir)
    first = [r for r in recs if r.role == "judge" and r.meta.get("judge_round", 0) == 0]
    assert len(first) == n and {r.parsed["RV"] for r in first} == {2}
    assert {r.stage.split("@")[-1] for r in recs if r.role == "judge" and "@" in r.stage} == {"1"}
    report = (res.run_dir / "report.md").read_text()
    assert "round 1: fake:echo (earlier: 0: fake:random)" in report
    lines = (res.run_dir / "records.jsonl").read_text().count("\n")
    rejudge(res.run_dir, "fake:echo", progress=False)    # same judge again: resumes round 1
    assert (res.run_dir / "records.jsonl").read_text().count("\n") == lines
    assert [r["round"] for r in api.load_manifest(res.run_dir).rejudges] == [0, 1, 1]


@pytest.mark.slow
def test_the_manifest_names_a_judge_only_when_answers_are_judged(tmp_path):
    def run(name, judge_model=None, **options):
        res = api.run("capability", model="fake:random", strategies="identity", limit=2, out=tmp_path / name,
                      judge=judge_model, options={"roles": "primary", **options}, progress=False)
        judged = any(r.role == "judge" for r in load_records(res.run_dir))
        return api.load_manifest(res.run_dir).judge, judged

    assert run("default") == (None, False)
    assert "| judge |" not in (tmp_path / "default" / "report.md").read_text()
    assert run("on", judge=True) == ("fake:random", True)
    assert run("other", "fake:echo") == ("fake:echo", True)
    assert run("other-off", "fake:echo", judge=False) == (None, False)


def test_suites_with_a_judge_keep_it_on():
    from rolebound.models import create_backend
    from rolebound.suites import get_suite

    b = create_backend("fake:random")
    ke = get_suite("knowledge-errors")
    assert ke.judge_enabled(ke.run_settings([]), b, b)
    mv = get_suite("multiverse")
    # multiverse judges only for its thinking/acting analysis, which needs reply text
    assert mv.judge_enabled(mv.run_settings(["cot"], scoring="logprob"), b, b)
    assert not mv.judge_enabled(mv.run_settings(["direct"], scoring="logprob"), b, b)
    assert not mv.judge_enabled(mv.run_settings(["cot"], options={"analysis": "false"}), b, b)


# -- backends that cannot ----------------------------------------------------------------------
@pytest.mark.slow
def test_injection_needs_a_chat_template_and_fails_before_any_call(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(CapabilityError, match="chat_template"):
        api.run("capability", model="openai:some-model", strategies="identity,injection", limit=2, out=out,
                backend_options={"base_url": "http://127.0.0.1:9"}, progress=False)
    assert not out.exists()


@pytest.mark.slow
def test_openai_with_a_local_tokenizer_passes_the_check():
    from rolebound.models import create_backend

    b = create_backend("openai:m", base_url="http://127.0.0.1:9", tokenizer="/some/tokenizer")
    CapabilitySuite().check(b, CapabilitySuite().run_settings(["injection"]), None)


# -- user data ---------------------------------------------------------------------------------
def test_user_jsonl_loads_and_levels_are_resolved_by_name(tmp_path):
    p = write_items(tmp_path / "x.jsonl", [item(1, "Elementary"), item(2, "A-level"), item(3, "high school")])
    ds = CapabilitySuite().load(str(p), CapabilitySuite().run_settings(["identity"]))
    assert [i.level for i in ds.items] == ["elementary", "a_level", "high_school"]


@pytest.mark.parametrize("bad,line,field,msg", [
    ({"level": "university"}, 2, "level", "not one of"),
    ({"answer": "E"}, 2, "answer", "A, B, C, D"),
    ({"options": ["1", "2", "3"]}, 2, "options", "at least 4"),
    ({"options": ["1", "1", "2", "3"]}, 2, "options", "differ"),
    ({"question": ""}, 2, "question", "at least 1"),
])
def test_bad_user_items_name_file_line_and_field(tmp_path, bad, line, field, msg):
    p = write_items(tmp_path / "x.jsonl", [item(1), {**item(2), **bad}])
    with pytest.raises(InputError) as e:
        CapabilitySuite().load(str(p), CapabilitySuite().run_settings(["identity"]))
    assert e.value.file == str(p) and e.value.line == line and e.value.field == field
    assert msg in str(e.value)


@needs_script
@pytest.mark.slow
def test_an_item_without_provenance_is_one_line_through_the_script(tmp_path):
    bare = {k: v for k, v in item(2).items() if k != "note"}
    data = write_items(tmp_path / "x.jsonl", [item(1), bare])
    assert_refused_without_provenance("capability", data, f"{data}:2", tmp_path / "run")


def test_duplicate_ids_are_rejected(tmp_path):
    p = write_items(tmp_path / "x.jsonl", [item(1), item(1)])
    with pytest.raises(InputError, match="duplicate id 'q1'") as e:
        CapabilitySuite().load(str(p), CapabilitySuite().run_settings(["identity"]))
    assert e.value.line == 2


def test_answer_may_be_the_option_text(tmp_path):
    p = write_items(tmp_path / "x.jsonl", [{**item(1), "answer": "3"}])
    assert CapabilitySuite().load(str(p), CapabilitySuite().run_settings(["identity"])).items[0].answer == "C"


def test_roles_file_can_add_roles_and_levels(tmp_path):
    text = ROLES_FILE.read_text(encoding="utf-8")
    text = text.replace("  - id: a_level\n", "  - id: university\n    name: University\n  - id: a_level\n", 1)
    text += ("\n  - id: phd\n    name: doctoral student\n    ceiling: university\n    capability: c\n    style: s\n"
             "    knowledge: {default: k}\n    cot: {reasoning: r, knows: k, can_reason: c, does_not_know: d,"
             " ideas: i, avoid: a}\n")
    roles = tmp_path / "roles.yaml"
    roles.write_text(text, encoding="utf-8")
    p = write_items(tmp_path / "x.jsonl", [item(1, "university"), item(2, "elementary")])
    res = api.run("capability", model="fake:random", strategies="identity", data=str(p), out=tmp_path / "run",
                  options={"roles_file": str(roles), "roles": "phd,kindergarten"}, progress=False)
    m = json.loads((res.run_dir / "metrics.json").read_text())
    assert [r["id"] for r in m["roles"]] == ["kindergarten", "phd"]
    phd = m["by_strategy"]["identity"]["per_role"]["phd"]
    assert phd["n_in"] == 2 and phd["n_above"] == 0


def test_roles_file_errors_point_at_the_line(tmp_path):
    bad = ROLES_FILE.read_text(encoding="utf-8").replace("ceiling: elementary", "ceiling: grade_nine", 1)
    path = tmp_path / "roles.yaml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(InputError, match="ceiling 'grade_nine'") as e:
        CapabilitySuite().load(None, CapabilitySuite().run_settings(["identity"], options={"roles_file": str(path)}))
    assert e.value.line == bad.splitlines().index("    ceiling: grade_nine") + 1


@pytest.mark.parametrize("opts,msg", [({"roles": "kindergarten,astronaut"}, "unknown role 'astronaut'"),
                                      ({"role": "primary"}, "unknown option 'role'"),
                                      ({"per_level": 0}, "per_level"),
                                      ({"roles": []}, "no role given")])
def test_bad_options_fail_clearly(opts, msg):
    s = CapabilitySuite()
    with pytest.raises(InputError, match=msg):
        s.load(None, s.run_settings(["identity"], options=opts))


def test_csv_importer_and_csv_data(tmp_path):
    src = tmp_path / "exam.csv"
    with src.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["Grade", "Subject", "Question", "A", "B", "C", "D", "Answer", "Year"])
        w.writerow(["4", "Mathematics", "What is 6 x 7?", "36", "42", "48", "54", "B", "2019"])
        w.writerow(["grade 7", "Science", "Which gas do plants take in?", "oxygen", "carbon dioxide", "helium",
                    "neon", "carbon dioxide", "2021"])
        w.writerow(["Regents", "Physics", "SI unit of force?", "joule", "watt", "newton", "pascal", "c", ""])
    fn, _ = all_importers()["capability-csv"]
    out = tmp_path / "exam.jsonl"
    summary = fn(str(src), str(out))
    assert "3 items" in summary
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["level"] for r in rows] == ["elementary", "intermediate", "high_school"]
    assert [r["answer"] for r in rows] == ["B", "B", "C"] and rows[0]["year"] == "2019"
    suite = CapabilitySuite()
    assert len(suite.load(str(out), suite.run_settings(["identity"])).items) == 3
    assert len(CapabilitySuite().load(str(src), CapabilitySuite().run_settings(["identity"])).items) == 3


def test_csv_importer_errors_name_the_line(tmp_path):
    src = tmp_path / "exam.csv"
    src.write_text("level,question,A,B,C,D,answer\nelementary,Q1,a,b,c,d,A\n,Q2,a,b,c,d,B\n", encoding="utf-8")
    fn, _ = all_importers()["capability-csv"]
    with pytest.raises(InputError, match="no level") as e:
        fn(str(src), str(tmp_path / "o.jsonl"))
    assert e.value.line == 3 and e.value.field == "level"


def test_jsonl_importer_maps_loose_keys(tmp_path):
    src = tmp_path / "raw.jsonl"
    src.write_text(json.dumps({"qid": 7, "difficulty": "A level", "stem": "Q?", "choices": ["w", "x", "y", "z"],
                               "gold": "d", "context": "Some passage."}) + "\n", encoding="utf-8")
    fn, _ = all_importers()["capability-jsonl"]
    fn(str(src), str(tmp_path / "o.jsonl"))
    row = json.loads((tmp_path / "o.jsonl").read_text())
    assert row["id"] == "7" and row["level"] == "a_level" and row["answer"] == "D" and row["passage"] == "Some passage."


def test_data_stats_tables():
    s = CapabilitySuite()
    ds = s.load(None, s.run_settings(["identity"]))
    tables = dict(s.stats(ds))
    counts = tables["Items by level and subject"]
    assert counts.loc["total", "total"] == len(ds.items) == sum(1 for _ in BANK_FILE.open())
    roles = tables["Roles and ceilings (Tables 1-2)"]
    assert roles.loc["kindergarten", "in-role items"] == 0
    assert roles.loc["teacher", "in-role items"] == len(ds.items)


# -- the real bundled model --------------------------------------------------------------------
@pytest.mark.model
def test_bundled_model_end_to_end(tmp_path, bundled):
    """identity + injection + no-role on two questions (two levels) for two roles; then one real judge call."""
    res = api.run("capability", model="bundled", strategies="identity,injection,no-role", limit=2,
                  out=tmp_path / "run", decoding={"max_tokens": 24},
                  options={"roles": "kindergarten,college"}, progress=False)
    assert not res.errors
    recs = load_records(res.run_dir)
    answers = [r for r in recs if r.role == "model"]
    assert len(answers) == 2 * 2 * 2 + 2
    inj = [r for r in answers if r.strategy == "injection"]
    for r in inj:
        assert r.kind == "complete"
        assert r.prompt.startswith("<|im_start|>system\n# ROLE\nYou are a ")
        # SmolLM2's chat template has no reasoning channel, so no marker before the prefill
        assert "<|im_end|>\n<|im_start|>assistant\nOkay, I am " in r.prompt and r.meta["think_tag"] == ""
        assert r.prompt.endswith("So, my role is")
    for r in answers:
        assert r.parsed == parse_boxed_letter(r.response) and r.correct == (r.parsed == r.gold)
    m = json.loads((res.run_dir / "metrics.json").read_text())
    oc = m["by_strategy"]["identity"]["outcomes"]
    assert oc["total"] == 4 and sum(oc[k] for k in ("valid", "missing", "unclosed", "idk", "other")) == 4
    assert (res.run_dir / "figures" / "heatmap.png").exists()
    assert "Table 3" in (res.run_dir / "report.md").read_text()

    judged = api.run("capability", model="bundled", strategies="identity", limit=1, out=tmp_path / "judged",
                     decoding={"max_tokens": 32}, options={"roles": "primary", "judge": True,
                                                           "judge_max_tokens": 24}, progress=False)
    jrecs = [r for r in load_records(judged.run_dir) if r.role == "judge"]
    assert len(jrecs) == 1 and jrecs[0].error is None and jrecs[0].meta["judged"].endswith("/identity/answer.primary")
    assert "Assigned role: primary school student" in jrecs[0].prompt[-1]["content"]


def test_injection_reads_the_thinking_markup_from_the_chat_template():
    from rolebound.models.base import detect_thinking_markup

    assert detect_thinking_markup("{% if x %}<think>\n{{ r }}</think>{% endif %}") == "<think>\n"
    assert detect_thinking_markup("<|turn>model\n<|channel>thought\n") == "<|channel>thought\n"
    assert detect_thinking_markup("<|im_start|>assistant\n") == "" and detect_thinking_markup(None) == ""
    from rolebound.models import create_backend

    assert create_backend("fake:random").thinking_markup() == "<think>\n"
    assert create_backend("fake:random", think_tag="<|channel>thought\n").thinking_markup() == "<|channel>thought\n"


def test_the_think_tag_backend_option_reaches_the_injection_prompt(tmp_path):
    res = api.run("capability", model="fake:random", strategies="injection", limit=2, out=tmp_path / "run",
                  backend_options={"think_tag": "[THINK]"}, progress=False)
    inj = [r for r in load_records(res.run_dir) if r.strategy == "injection"]
    assert inj and all("<|assistant|>[THINK]Okay, I am " in r.prompt and r.meta["think_tag"] == "[THINK]"
                       for r in inj)


@pytest.mark.slow
def test_permutations_ask_shifted_options_apart_from_the_paper_figures(tmp_path):
    kw = dict(model="fake:random", strategies="identity", limit=4, options={"roles": "primary"}, progress=False)
    plain = api.run("capability", out=tmp_path / "plain", **kw)
    res = api.run("capability", out=tmp_path / "perm", **{**kw, "options": {"roles": "primary", "permutations": 2}})
    recs = load_records(res.run_dir)
    shifted = [r for r in recs if r.stage.endswith("~s1")]
    assert len(shifted) == len([r for r in recs if r.stage == "answer.primary"]) == 4
    assert all(r.meta["order"] == [3, 0, 1, 2] and r.meta["shift"] == 1 for r in shifted)
    assert res.metrics["by_strategy"] == plain.metrics["by_strategy"]       # TA/IA/A: the paper's order only
    assert res.metrics["shifts"]["answer"]["items"] == 4
