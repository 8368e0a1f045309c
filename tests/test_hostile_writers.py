"""Hostile input, second round (issue 52, families 1, 2, 3 and 6), through the installed script:
every writer writes only a new, empty or its own output, never one of its inputs and never inside
the installed package; a path made from data stays inside its folder; a FIFO where a file is read
is one line, never a hang; a record of another run is refused with its line. Each refusal is exit
2 in one line, with nothing written."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

import rolebound
from rolebound import api
from helpers import needs_script, refused, rolebound as rb

pytestmark = [needs_script, pytest.mark.slow]

QUICK = 30      # seconds: a command that waits on a FIFO fails the test instead of stalling the suite
PACKAGE = Path(rolebound.__file__).resolve().parent


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"dir"
            for p in sorted(folder.rglob("*")) if not p.is_fifo()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished charm run and a finished multiverse run, both on fake:random. Made in-process (the
    folders are what the tests read; the script is what they test), on a cache of their own."""
    base = tmp_path_factory.mktemp("runs")
    out = {}
    mp = pytest.MonkeyPatch()
    mp.setenv("ROLEBOUND_CACHE_DIR", str(base / "cache"))
    try:
        for suite in ("charm", "multiverse"):
            out[suite] = base / suite
            api.run(suite, model="fake:random", limit=3, out=out[suite], progress=False)
    finally:
        mp.undo()
    return out


def copy_run(runs, suite: str, dest: Path) -> Path:
    shutil.copytree(runs[suite], dest)
    return dest


# -- 1. writers replace only what is theirs ------------------------------------------------------
def test_data_export_leaves_a_users_folder_and_a_run_in_progress_alone(tmp_path, runs):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my own notes")
    refused(rb("data", "export", "charm", "--out", mine), "not an export folder", "README.md")
    assert (mine / "README.md").read_text() == "my own notes" and sorted(os.listdir(mine)) == ["README.md"]
    running = tmp_path / "running"                  # a first run's folder while it runs: lock and records
    running.mkdir()
    (running / ".lock").touch()
    (running / "records.jsonl").write_text("")
    before = snapshot(running)
    refused(rb("data", "export", "charm", "--out", running), "not an export folder")
    assert snapshot(running) == before
    done = copy_run(runs, "charm", tmp_path / "done")
    before = snapshot(done)
    refused(rb("data", "export", "charm", "--out", done))
    assert snapshot(done) == before


def test_an_export_folder_is_its_own_and_refreshed_in_place_never_through_a_link(tmp_path):
    out = tmp_path / "exp"
    assert rb("data", "export", "capability", "--out", out).returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file")
    [parquet] = (out / "elementary").glob("*.parquet")
    for p in (parquet, out / "README.md"):
        p.unlink()
        p.symlink_to(victim)
    res = rb("data", "export", "capability", "--out", out)
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "someone else's file"
    assert not parquet.is_symlink() and not (out / "README.md").is_symlink() and (out / "rolebound.json").is_file()


def test_charm_review_never_writes_over_its_inputs(tmp_path):
    data = tmp_path / "built.yaml"
    data.write_text((PACKAGE / "suites" / "charm" / "data" / "regions.yaml").read_text())
    sheet = tmp_path / "alice.csv"
    sheet.write_text("item_id,region,criterion_1,criterion_2,criterion_3,criterion_4,comment\n"
                     "concept/smartphone,shared,1,1,1,1,\n")
    before = {p: p.read_bytes() for p in (data, sheet)}
    for out in (sheet, data):
        refused(rb("build", "charm-review", sheet, sheet, "--data", data, "--out", out), "input of this review")
    assert {p: p.read_bytes() for p in before} == before


SEEDS = """regions: [{id: Nordic, name: Nordic}]
characters:
  - {id: greta, name: Greta Thunberg, region: Nordic, profile: 'Greta Thunberg, a Swedish activist', reality: real,
     period: contemporary, universe: Sweden, note: test seed}
facts:
  - {id: g2, target: greta, bc_question: 'When did Greta Thunberg start her school strike?',
     kv_question: 'When did you start your school strike?', answer: '2018', distractors: ['2015', '2016', '2020'],
     note: test seed}
"""


def test_build_charm_again_keeps_a_filled_review_sheet(tmp_path):
    """An earlier build's folder (its build_summary.yaml) whose review sheet a reviewer filled in."""
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(SEEDS)
    out = tmp_path / "build"
    out.mkdir()
    (out / "build_summary.yaml").write_text("generator: fake:random\n")
    (out / "review_sheet.csv").write_text("item_id,region,kind,question,correct_answer,distractor_1,distractor_2,"
                                          "distractor_3,criterion_1,criterion_2,criterion_3,criterion_4,comment\n"
                                          "fact/g2,Nordic,fact,q,2018,2015,2016,2020,,,,,\n"
                                          "fact/g3,Nordic,fact,q,2019,2015,2016,2020,1,1,0,1,checked by Alice\n")
    before = snapshot(out)
    refused(rb("build", "charm", "--characters", seeds, "--generator", "fake:random", "--out", out, "--quiet"),
            "review_sheet.csv:3", "reviewer")
    assert snapshot(out) == before
    # a file of the build as its own --characters: an input, refused
    shutil.copy(seeds, out / "charm_built.yaml")
    before = snapshot(out)
    refused(rb("build", "charm", "--characters", out / "charm_built.yaml", "--generator", "fake:random",
               "--out", out, "--quiet"), "--characters file")
    assert snapshot(out) == before


def test_build_capability_never_writes_inside_the_package(tmp_path):
    bank = PACKAGE / "suites" / "capability" / "data" / "bank.jsonl"
    before = bank.read_bytes(), bank.stat().st_mtime_ns
    refused(rb("build", "capability"), "--out")
    refused(rb("build", "capability", "--out", bank), "inside the installed rolebound package")
    refused(rb("run", "charm", "--model", "fake:random", "--limit", "1", "--out", PACKAGE / "runs" / "x"),
            "installed rolebound package")
    assert (bank.read_bytes(), bank.stat().st_mtime_ns) == before and not (PACKAGE / "runs").exists()
    res = rb("build", "capability", "--out", tmp_path / "bank.jsonl")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "bank.jsonl").read_bytes() == before[0]


def test_an_empty_out_is_refused_for_every_writer(tmp_path):
    (tmp_path / "report.html").write_text("mine")
    before = snapshot(tmp_path)
    for args in (["data", "export", "charm"], ["compare", tmp_path, tmp_path], ["build", "capability"]):
        refused(rb(*args, "--out", "", cwd=tmp_path), "--out", "empty")
    assert snapshot(tmp_path) == before


# -- 2. paths from data stay inside their folder --------------------------------------------------
def test_a_level_id_cannot_put_an_export_outside_its_folder(tmp_path):
    roles = (PACKAGE / "suites" / "capability" / "data" / "roles.yaml").read_text()
    for bad in ("../../escape", str(tmp_path / "abs")):
        evil = tmp_path / "evil.yaml"
        evil.write_text(roles.replace("  - id: elementary", f"  - id: {json.dumps(bad)}")
                        .replace("name: Elementary", "name: elementary"))
        refused(rb("data", "export", "capability", "--out", tmp_path / "exp" / "sub", "--set", f"roles_file={evil}",
                   cwd=tmp_path), "not a plain folder name")
    assert not any((tmp_path / n).exists() for n in ("exp", "escape", "abs"))


def test_an_exports_sources_and_configs_stay_inside_it(tmp_path):
    out = tmp_path / "exp"
    assert rb("data", "export", "capability", "--out", out).returncode == 0
    meta = json.loads((out / "rolebound.json").read_text())
    for key, value, says in (("sources", ["/etc/hostname"], "leaves"), ("sources", ["../x.yaml"], "leaves"),
                             ("configs", {"../../etc": 1}, "not a plain folder name")):
        (out / "rolebound.json").write_text(json.dumps({**meta, key: value}))
        refused(rb("run", "capability", "--data", f"hf:{out}", "--model", "fake:random", "--out", tmp_path / "r"),
                "rolebound.json", f"field '{key}'", says)
        assert not (tmp_path / "r").exists()


# -- 3. a FIFO where a file is read: one line, never a hang ----------------------------------------
def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("name, command", [
    ("records.jsonl", ["report"]), ("manifest.json", ["report"]), ("records.jsonl", ["compare"]),
    ("metrics.json", ["card", "--model", "fake:random", "--runs"]),
    ("records.jsonl", ["card", "--model", "fake:random", "--runs"]),
])
def test_a_fifo_in_a_run_folder_is_refused_not_waited_on(tmp_path, runs, name, command):
    run = copy_run(runs, "charm", tmp_path / "run")
    if command[0] == "card" and name == "records.jsonl":
        (run / "metrics.json").unlink()                 # the card then rebuilds the metrics from the records
    fifo(run / name)
    args = [*command, run] + ([runs["charm"], "--out", tmp_path / "cmp"] if command == ["compare"] else [])
    if command[0] == "card":
        args += ["--out", tmp_path / "card"]
    refused(rb(*args, timeout=QUICK), f"{name}: not a regular file")
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "card").exists()


def test_a_fifo_as_an_exports_rolebound_json_is_refused(tmp_path):
    out = tmp_path / "exp"
    assert rb("data", "export", "capability", "--out", out).returncode == 0
    fifo(out / "rolebound.json")
    refused(rb("run", "capability", "--data", f"hf:{out}", "--model", "fake:random", "--out", tmp_path / "r",
               timeout=QUICK), "rolebound.json: not a regular file")


def test_a_stopped_report_does_not_offer_to_resume(tmp_path, runs, monkeypatch, capsys):
    """SIGTERM during `report` (the handler raises KeyboardInterrupt with TERM set): a report has
    nothing to resume; `run` still says how to resume."""
    from rolebound import api, cli

    def stopped(*a, **k):
        cli.TERM["hit"] = True
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "build_report", stopped)
    monkeypatch.setitem(cli.TERM, "hit", False)
    monkeypatch.setitem(cli.TERM, "resumes", True)
    run = copy_run(runs, "charm", tmp_path / "run")
    assert cli._main(["report", str(run), "-q"]) == 143
    err = capsys.readouterr().err
    assert "terminated" in err and "resume" not in err
    assert cli._resumes(["run", "charm"]) and cli._resumes(["report", "x", "--judge", "fake:random"])
    assert not cli._resumes(["compare", "a", "b"]) and not cli._resumes(["card", "--compare", "a"])


# -- 6. a record of another run is refused with its line ----------------------------------------------
def test_records_of_another_suite_or_model_are_refused_with_their_line(tmp_path, runs):
    mixed = copy_run(runs, "charm", tmp_path / "mixed")
    n = len((mixed / "records.jsonl").read_text().splitlines())
    with (mixed / "records.jsonl").open("a") as fh:
        fh.write((runs["multiverse"] / "records.jsonl").read_text())
    refused(rb("report", mixed), f"records.jsonl:{n + 1}", "field 'suite'", "multiverse")
    refused(rb("compare", mixed, runs["charm"], "--out", tmp_path / "cmp"), f"records.jsonl:{n + 1}")
    other = copy_run(runs, "charm", tmp_path / "other")
    lines = (other / "records.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["model"] = "fake:constant"
    lines[1] = json.dumps(rec)
    (other / "records.jsonl").write_text("\n".join(lines) + "\n")
    refused(rb("report", other), "records.jsonl:2", "field 'model'", "fake:constant")


@pytest.fixture(scope="module")
def charm_log(tmp_path_factory) -> Path:
    """An inspect_ai log of rolebound/charm on mockllm (2 samples), as JSON."""
    pytest.importorskip("inspect_ai", reason="the [inspect] extra (inspect_ai) is not installed")
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import write_eval_log
    from inspect_ai.model import ModelOutput, get_model

    from rolebound.inspect import _registry  # noqa: F401 - the tasks without the entry point

    def outputs():
        while True:
            yield ModelOutput.from_content(model="mockllm", content="Answer: 1")

    base = tmp_path_factory.mktemp("inspect")
    [log] = inspect_eval("rolebound/charm", model=get_model("mockllm/model", custom_outputs=outputs(), memoize=False),
                         limit=2, log_dir=str(base / "logs"), display="none", task_args={"set": "similarity=false"})
    assert log.status == "success", log.error
    path = base / "charm.json"
    write_eval_log(log, str(path))
    return path


def edited_log(log: Path, dest: Path, suite: str) -> Path:
    data = json.loads(log.read_text())
    data["eval"]["metadata"]["rolebound"]["suite"] = suite
    dest.write_text(json.dumps(data))
    return dest


def test_import_inspect_guards_its_out_and_leaves_nothing_when_refused(tmp_path, charm_log):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.html").write_text("<p>my report</p>")
    refused(rb("import", "inspect", charm_log, "--out", mine), "report.html")
    assert sorted(os.listdir(mine)) == ["report.html"] and (mine / "report.html").read_text() == "<p>my report</p>"
    out = tmp_path / "new" / "run"
    refused(rb("import", "inspect", edited_log(charm_log, tmp_path / "nosuch.json", "nosuch"), "--out", out),
            "unknown suite 'nosuch'")
    assert not (tmp_path / "new").exists()
    refused(rb("import", "inspect", edited_log(charm_log, tmp_path / "multi.json", "multiverse"), "--out", out),
            "suite 'charm'", "multiverse")
    assert not (tmp_path / "new").exists()
    fifo(tmp_path / "fifo.eval")
    refused(rb("import", "inspect", tmp_path / "fifo.eval", "--out", out, timeout=QUICK), "not a regular file")
    res = rb("import", "inspect", charm_log, "--out", out)          # the retry with the same --out works
    assert res.returncode == 0, res.stderr
    assert (out / "manifest.json").is_file() and (out / "report.html").is_file()
