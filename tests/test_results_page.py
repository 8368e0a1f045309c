"""bench/results.py: the page is copied from run folders; readings count a call's last record."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _results():
    spec = importlib.util.spec_from_file_location("results_page", ROOT / "bench" / "results.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["results_page"] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_sections_copies_the_chosen_tables_one_level_down_without_figures():
    md = ("# t\n\n## Table 1: x\n\n| a |\n|---|\n| 1 |\n\n## Figure 3\n\n![f](figures/f.png)\n\n"
          "## Table 1 again, with a figure\n\n![g](figures/g.png)\n\n## Per-sample records\n\nrows\n")
    out = _results().sections(md, ["Table 1", "Per-sample", "Figure"])
    assert out.startswith("### Table 1: x") and "| 1 |" in out
    assert "![" not in out and "Per-sample" not in out


def test_answers_read_counts_the_last_record_of_each_call(tmp_path):
    rows = [
        {"call_id": "a", "role": "model", "stage": "bc", "gold": "1", "parsed": "invalid"},
        {"call_id": "a", "role": "model", "stage": "bc", "gold": "1", "parsed": "2"},   # re-read later
        {"call_id": "b", "role": "model", "stage": "bc", "gold": "3", "parsed": None},
        {"call_id": "c", "role": "model", "stage": "bc", "gold": None, "parsed": None},  # no gold: not counted
        {"call_id": "d", "role": "judge", "stage": "judge", "kind": "chat", "parsed": "yes"},
        {"call_id": "e", "role": "judge", "stage": "segment", "kind": "chat", "parsed": "invalid"},
    ]
    ids = {"item_id": "i", "suite": "charm", "strategy": "s"}
    (tmp_path / "records.jsonl").write_text("".join(json.dumps({**ids, **r}) + "\n" for r in rows))
    r = _results()
    assert r.answers_read(tmp_path) == "1/2 read, 1 invalid (50.0%): bc 1/2"
    assert r.answers_read(tmp_path, "judge") == "1/1 read, 0 invalid (0.0%)"


def test_every_spec_names_a_registered_suite_and_strategy():
    from rolebound.suites import get_suite

    for spec in _results().SPECS:
        suite = get_suite(spec.suite)
        strategies = spec.args[spec.args.index("--strategy") + 1].split(",")
        assert set(strategies) <= set(suite.strategies), spec.name
        assert spec.reading or spec.data, spec.name     # a run on the papers' data is read once finished


def test_a_run_whose_folder_is_absent_keeps_its_section_and_row(tmp_path, monkeypatch):
    r = _results()
    old = ("# Results\n\n| run | wall time | a | b | c | d |\n|---|---|---|---|---|---|\n"
           "| [capability](#capability) | 6.7 min | 21/52 read | - | +-0.5 | 5.2 h |\n| all | 6.7 min | | | | |\n\n"
           "## capability\n\n| | |\n|---|---|\n| wall time | 6.7 min |\n\n**Reading** (written after the run): small.\n")
    page = tmp_path / "results.md"
    page.write_text(old)
    monkeypatch.setattr(r, "PAGE", page)
    monkeypatch.setattr(r, "RUNS", tmp_path / "runs")              # no run folders at all
    monkeypatch.setattr(r, "SPECS", [r.BY_NAME["capability"]])
    r.write(refresh=False)
    new = page.read_text()
    assert "| [capability](#capability) | 6.7 min | 21/52 read |" in new and "| all | 6.7 min |" in new
    assert "**Reading** (written after the run): small." in new and new.count(r.KEPT) == 1
    r.write(refresh=False)                                          # kept again, marked once
    assert page.read_text().count(r.KEPT) == 1


def test_wall_time_sums_the_invocations_only_when_each_was_timed():
    r = _results()
    timing = {"start": 100.0, "items_done": 160.0}
    assert r.wall_s({"counts": {"invocations": 3, "timed_invocations": 3, "wall_s": 900}, "timing": timing}) == 900
    assert r.wall_s({"counts": {"invocations": 3, "timed_invocations": 1, "wall_s": 70}, "timing": timing}) == 60
    assert "not timed" in r.wall_note({"counts": {"invocations": 3, "timed_invocations": 1, "wall_s": 70}})
    assert r.wall_note({"counts": {"invocations": 2, "timed_invocations": 2, "wall_s": 70}}) == " (over 2 invocations)"


def test_an_unfinished_run_counts_the_jobs_answered_in_full(tmp_path):
    rows = [
        {"item_id": "a", "strategy": "s", "call_id": "a1", "role": "model", "stage": "bc"},
        {"item_id": "a", "strategy": "s", "call_id": "a2", "role": "model", "stage": "ba"},
        {"item_id": "b", "strategy": "s", "call_id": "b1", "role": "model", "stage": "bc", "error": "timeout"},
        {"item_id": "a", "strategy": "t", "call_id": "a3", "role": "model", "stage": "nr"},
    ]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps({"suite": "charm", **r}) + "\n" for r in rows))
    m = {"counts": {"jobs": 10, "invocations": 3, "wall_s": 7200}}
    assert _results().unfinished(tmp_path, m) == "2 of 10 jobs (item x strategy) answered after 3 invocation(s), 2.0 h of wall time"
    running = {"n_items": 5, "strategies": ["s", "t"], "started": "2026-12-04T20:44:12"}
    assert _results().unfinished(tmp_path, running) == "2 of 10 jobs (item x strategy) answered so far, running since 2026-12-04T20:44:12"


def test_carried_replies_resume_a_run_on_another_machine_as_cache_hits(tmp_path, monkeypatch):
    """carry-out puts the run's own cache in a file; on a bare machine carry-in and the same
    command give the same records' answers with no model call."""
    import shutil
    import subprocess

    r = _results()
    runs = tmp_path / "runs"
    monkeypatch.setattr(r, "RUNS", runs)
    monkeypatch.setattr(r, "CARRIED", tmp_path / "carried")
    spec = r.Spec("t", "charm", [], [], data=("charm-official", "x", "x.jsonl"))
    cmd = [str(Path(sys.executable).with_name("rolebound")), "run", "charm", "--model", "fake:random",
           "--limit", "12", "--out", str(runs / "t")]

    def go() -> dict:
        out = subprocess.run(cmd, env=r.run_env(spec), capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads((runs / "t" / "manifest.json").read_text())

    first = go()
    assert first["counts"]["model_calls"] > 0 and (runs / "t.cache" / "responses.sqlite").exists()
    recs = (runs / "t" / "records.jsonl").read_text().splitlines()
    # a report's re-reading appends a call's record again, keeping the call's own (earlier) time
    (runs / "t" / "records.jsonl").write_text("\n".join(recs + recs[:1]) + "\n")
    assert r.carry_out(spec).startswith("t: ")
    entry = json.loads((tmp_path / "carried" / "t.sessions.json").read_text())[-1]
    assert entry["records"] == len(recs)
    assert entry["last_record"] == max(json.loads(x)["time"] for x in recs)
    lines = (tmp_path / "carried" / "t.jsonl").read_text().splitlines()
    assert len(lines) == first["counts"]["model_calls"]
    metrics = (runs / "t" / "metrics.json").read_text()
    shutil.rmtree(runs)                                         # the next machine: nothing but git
    assert r.carry_in(spec).startswith(f"t: {len(lines)} replies put in")
    again = go()
    assert again["counts"]["model_calls"] == 0 and again["counts"]["cache_hits"] == len(lines)
    assert (runs / "t" / "metrics.json").read_text() == metrics
    assert r.carry_in(spec).startswith("t: 0 replies")         # already there: nothing added twice
    (tmp_path / "carried" / "t.jsonl").write_text(lines[0] + "\n{not json\n")
    with __import__("pytest").raises(SystemExit, match=r"t\.jsonl:2: not a carried reply"):
        r.carry_in(spec)
    (tmp_path / "carried" / "t.jsonl").write_text('{"key": "k", "value": "just text"}\n')
    with __import__("pytest").raises(SystemExit, match=r"t\.jsonl:1: not a carried reply \(key must be"):
        r.carry_in(spec)


def test_a_carried_run_counts_the_time_of_every_machine_it_ran_on(tmp_path, monkeypatch):
    r = _results()
    monkeypatch.setattr(r, "CARRIED", tmp_path)
    spec = r.Spec("t", "charm", [], [])
    assert r.machines(spec) == []                                   # never carried: the manifest's own time
    (tmp_path / "t.sessions.json").write_text(json.dumps([
        {"started": "2026-12-05T11:00:00+00:00", "finished": None, "last_record": "2026-12-05T13:30:00+00:00",
         "records": 2000, "machine": "x86_64 A"},
        {"started": "2026-12-06T09:00:00+00:00", "finished": "2026-12-06T10:15:00+00:00",
         "last_record": "2026-12-06T10:14:59+00:00", "records": 3480, "machine": "x86_64 B"}]))
    rows = r.machines(spec)
    assert [x["minutes"] for x in rows] == [150.0, 75.0]
    note = r.machines_note(rows)
    assert "x86_64 A, 2026-12-05T11:00 to 2026-12-05T13:30 UTC (150 min, 2000 records, unfinished)" in note
    assert note.endswith("x86_64 B, 2026-12-06T09:00 to 2026-12-06T10:15 UTC (75 min, 3480 records)")


def _run_sections(page: str) -> dict[str, str]:
    import re

    return {p.split("\n", 1)[0][3:].strip(): p for p in re.split(r"(?m)^(?=## )", page) if p.startswith("## ")}


def test_the_page_opens_with_every_runs_figures_and_verdict():
    """docs/results.md as committed: one table first, a row per run with its headline figures
    (each the cell of its own table, copied) and its verdict; each run's section opens with the
    same verdict, whose every number is in the run's own section; markdown escapes, no entities."""
    import re

    r = _results()
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    head = page.split("\n## ", 1)[0]
    rows = [x for x in head.splitlines() if x.startswith("| [**")]
    assert [re.match(r"\| \[\*\*([^*]+)\*\*\]", x).group(1) for x in rows] == [s.name for s in r.SPECS]
    secs = _run_sections(page)
    for spec in r.SPECS:
        g, sec = r.GLANCE[spec.name], secs[spec.name]
        row = next(x for x in rows if f"[**{spec.name}**]" in x)
        for p in g.picks:
            value = r.picked(sec, p)
            assert value != "-" and f"{p.label} {value}" in row, (spec.name, p.label)
        assert g.verdict in row and len(g.verdict) <= 400, spec.name          # two or three lines
        first = [x for x in sec.split("\n")[1:] if x.strip() and x != r.KEPT][0]
        assert first == r.VERDICT + g.verdict, spec.name                       # the section opens with it
        for num in re.findall(r"\d[\d,.]*\d|\d", g.verdict):                   # no figure typed in by hand
            assert num in sec.replace(r.VERDICT + g.verdict, ""), (spec.name, num)
    assert "&amp;" not in page and "&lt;" not in page and "# BA+ & FC-BC" in page


def test_verdicts_figures_folds_and_entities_on_a_made_up_section(monkeypatch):
    r = _results()
    monkeypatch.setattr(r, "SPECS", [r.Spec("t", "charm", [], [])])
    sec = ("## t\n\n" + r.KEPT + "\n\n| | |\n|---|---|\n| answers with a gold label | 9/10 read, 1 invalid (10.0%): bc 1/10 |\n\n"
           "### Accuracy by question type\n\n| question | boundary | n | acc |\n|---|---|---|---|\n"
           "| BA | all | 10 | 20.4 \\[17.5, 23.5\\] |\n| BC | all | 9 | 4.8 |\n\n"
           "### Answer extraction: readings per rule\n\n| stage | rule | answers |\n|---|---|---|\n| ba | a\\_b | 3 |\n\n"
           "*p &lt; 0.05; # BA+ &amp; FC-BC; &lt;b&gt;*\n\n**Reading** (written after the run): long.\n")
    assert r.picked(sec, r.Pick("BA", "Accuracy by", ("BA", "all"), "acc")) == "20.4 \\[17.5, 23.5\\]"
    assert r.picked(sec, r.Pick("BC", "Accuracy by", ("BC", "all"), "acc")) == "4.8"
    assert r.picked(sec, r.Pick("KV", "Accuracy by", ("KV", "all"), "acc")) == "-"
    assert r.fact(sec, "answers with a gold label").split(":")[0] == "9/10 read, 1 invalid (10.0%)"
    r.GLANCE["t"] = r.Glance("Short verdict.", [r.Pick("BA", "Accuracy by", ("BA", "all"), "acc")])
    try:
        once = r.folded(r.with_verdict(r.kept(sec), "t"))
        again = r.folded(r.with_verdict(r.kept(once), "t"))
        assert once == again and once.count("**Verdict.** Short verdict.") == 1
        assert once.index(r.KEPT) < once.index("**Verdict.**") < once.index("| answers with")
        assert "<details><summary>1 rows</summary>" in once and "| ba | a\\_b | 3 |" in once   # every row kept
        assert "*p < 0.05; # BA+ & FC-BC; \\<b>*" in once
        assert r.glance({"t": once})[2].startswith("| [**t**](#t) | BA 20.4 \\[17.5, 23.5\\] | 9/10 read")
    finally:
        del r.GLANCE["t"]
