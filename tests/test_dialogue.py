"""The dialogue strategy (rolebound.dialogue) on the fake backend: turn records, shared dialogues,
resume inside a dialogue (kill -9 through the installed script), by-depth metrics (depth 0 is
the single-turn figure), and bad input (one line, exit 2, before any call)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rolebound import api
from rolebound.dialogue import metrics as dm
from rolebound.store import load_records

SCRIPT = Path(sys.executable).with_name("rolebound")


def charm(out, *, limit=6, use_cache=False, **opts):
    options = {"depths": "0,2", "warmup": "scripted", "similarity": False, **opts}
    return api.run("charm", model="fake:random", strategies="dialogue", limit=limit, out=out,
                   options=options, progress=False, use_cache=use_cache)


@pytest.mark.slow
def test_turns_are_records_and_probes_name_depth_and_dialogue(tmp_path):
    res = charm(tmp_path / "run")
    recs = load_records(tmp_path / "run")
    turns = [r for r in recs if r.stage.startswith("turn@")]
    probes = dm.probe_records(recs)
    assert turns and all(r.meta["user"] and r.response is not None for r in turns)
    assert all(r.completion_tokens is not None for r in turns)
    # one scripted dialogue per role, shared by its probes: 2 turns each, never more
    roles = {r.meta["role"] for r in probes}
    assert len(turns) == 2 * len(roles)
    deep = [r for r in probes if r.meta["depth"] == 2]
    assert deep and all(r.meta["dialogue"] in {t.item_id for t in turns} for r in deep)
    # the probe at depth 2 carries the two exchanges, the model's replies included, then the probe
    p = deep[0]
    t1 = next(t for t in turns if t.item_id == p.meta["dialogue"] and t.stage == "turn@1")
    assert p.prompt[1] == {"role": "assistant", "content": t1.response} and len(p.prompt) == 5
    # --limit counts probes (BA and BC), not turns
    assert {r.meta["probe"] for r in probes} == {"ba", "bc"}
    assert res.manifest.n_items <= 6 and len({r.item_id for r in probes}) == res.manifest.n_items


@pytest.mark.slow
def test_depth_zero_equals_the_single_turn_figures(tmp_path):
    """One run, both strategies: the same items and decoding."""
    single = api.run("charm", model="fake:random", strategies="independent,dialogue", limit=12, out=tmp_path / "s",
                     options={"depths": "0,2", "similarity": False}, progress=False, use_cache=False).metrics
    d = single["dialogue"]
    zero = {n: d["metrics"][n]["scripted"]["rows"][0] for n in d["names"]}
    assert all(z["depth"] == 0 for z in zero.values())
    assert zero["BA"]["rate"] == single["stage_accuracy"]["ba/all"]["rate"]
    assert zero["BC"]["rate"] == single["stage_accuracy"]["bc/all"]["rate"]
    assert zero["C-Gap"]["rate"] == single["matrix"]["all"]["compliance_gap"]["rate"]
    assert zero["R-Fail"]["rate"] == single["matrix"]["all"]["recognition_failure"]["rate"]


@pytest.mark.slow
def test_resume_inside_a_dialogue_generates_no_turn_twice(tmp_path):
    out = tmp_path / "run"
    charm(out, depths="0,3")
    path = out / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # stop the run inside its dialogues: keep every turn@1 and turn@2, drop turn@3 and the deep probes
    keep = [ln for ln in lines if not ('"turn@3"' in ln or "@3.scripted" in ln)]
    dropped = len(lines) - len(keep)
    assert dropped > 0
    path.write_text("".join(keep))
    again = charm(out, depths="0,3")
    assert again.counts.calls == dropped and again.counts.resumed == len(keep)   # only what was lost is asked again
    ids = [r.call_id for r in load_records(out, latest=False)]
    assert len(ids) == len(set(ids))


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
def test_kill_minus_9_inside_a_dialogue_then_resume(tmp_path):
    out = tmp_path / "run"
    cmd = [str(SCRIPT), "run", "charm", "--model", "fake:random", "--strategy", "dialogue", "--set", "depths=0,6",
           "--limit", "4", "--out", str(out), "--concurrency", "1", "--quiet", "--no-cache"]
    proc = subprocess.Popen(cmd, env={**os.environ, "ROLEBOUND_FAKE_DELAY": "0.1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / "records.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if records.exists() and records.read_text().count('"turn@') >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {json.loads(ln)["call_id"] for ln in records.read_text().splitlines() if ln.endswith("}")}
    assert any("/turn@" in c for c in before)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    ids = [r.call_id for r in load_records(out, latest=False)]
    assert len(ids) == len(set(ids))                        # no turn (or probe) generated twice
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["model_calls"] == len(ids) - len(before) and m["counts"]["resumed"] == len(before)
    assert m["counts"]["invocations"] == 2          # the killed invocation counts, though it wrote no counts
    assert "dialogue" in json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
def test_simulated_user_turns_are_their_own_records(tmp_path):
    res = charm(tmp_path / "run", limit=3, warmup="simulated", user_model="fake:echo", goal="pressure")
    recs = load_records(tmp_path / "run")
    users = [r for r in recs if r.stage.startswith("user@")]
    assert users and all(r.role == "user" and r.model == "fake:echo" for r in users)
    turns = [r for r in recs if r.stage.startswith("turn@")]
    assert all(t.meta["user"] for t in turns)
    # goal=pressure steers toward the probe's topic: one dialogue per probe target
    assert "steer the conversation" in users[0].prompt[0]["content"]
    assert res.metrics["dialogue"]["turns"]["user_calls"] == len(users)


@pytest.mark.slow
def test_items_warmup_and_report_figure(tmp_path):
    res = charm(tmp_path / "run", limit=4, warmup="scripted,items")
    d = res.metrics["dialogue"]
    assert d["warmups"] == ["items", "scripted"]
    turns = [r for r in load_records(tmp_path / "run") if r.stage.startswith("turn@")]
    assert {t.meta["source"].split(":")[0] for t in turns} == {"scripted", "item"}
    md = (tmp_path / "run" / "report.md").read_text()
    assert "Headline figures by dialogue depth" in md and "dialogue_drift" in md


def test_paired_change_and_drift_slope():
    base = {f"k{i}": i % 2 == 0 for i in range(10)}          # 50%
    worse = {f"k{i}": i % 4 == 0 for i in range(10)}         # 30%: 2 of the 5 right answers flip
    ch = dm.paired(base, worse)
    assert ch["diff"] == pytest.approx(-20.0) and ch["lo"] <= -20.0 <= ch["hi"] and ch["n"] == 10
    assert dm.paired(base, worse) == ch                      # seeded: the same interval every time
    d = dm.drift({0: base, 4: worse, 8: {k: False for k in base}})
    assert d["slope"] == pytest.approx(-25.0) and d["lo"] <= d["slope"] <= d["hi"]   # 50, 30, 0: -25 per 4 turns
    assert dm.drift({0: base}) is None


def test_options_are_checked():
    from rolebound.errors import InputError
    from rolebound.suites import get_suite
    from rolebound.suites.base import validate_options

    s = get_suite("charm")
    assert validate_options(s, {"depths": "8, 0,4"}).depths == "0,4,8"
    for bad in ("-1", "2,x", "", "1.5"):
        with pytest.raises(InputError, match="depths"):
            validate_options(s, {"depths": bad})
    with pytest.raises(InputError, match="warmup"):
        validate_options(s, {"warmup": "chat"})


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
@pytest.mark.parametrize("args, words", [
    (["--set", "depths=0,-4"], "depths"),
    (["--set", "warmup=simulated"], "user_model"),
    (["--set", "depths=0,40", "--set", "turn_max_tokens=900", "--backend-opt", "context_length=4096"],
     "depth 40 needs about"),
])
def test_bad_input_is_one_line_exit_2_before_any_call(tmp_path, args, words):
    out = tmp_path / "run"
    res = subprocess.run([str(SCRIPT), "run", "charm", "--model", "fake:random", "--strategy", "dialogue",
                          "--limit", "2", "--out", str(out), *args], capture_output=True, text=True, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert len(err.splitlines()) == 1 and words in err, err
    assert not (out / "records.jsonl").exists()


@pytest.mark.slow
def test_an_engine_window_tighter_than_the_models_is_the_one_checked(tmp_path, monkeypatch):
    # the llamacpp engine keeps prefix_max of its n_ctx cells for the resident prefix: its
    # context_window() is what a dialogue must fit, whatever the model's config says
    from rolebound.errors import InputError
    from rolebound.models.base import Backend

    monkeypatch.setattr(Backend, "context_window", lambda self: 700)
    with pytest.raises(InputError, match="depth 8 needs about .* more than the model's 700"):
        charm(tmp_path / "run", limit=2, depths="0,8")
    assert not (tmp_path / "run" / "records.jsonl").exists()
    monkeypatch.setattr(Backend, "context_window", lambda self: None)      # the model's own: fits
    assert charm(tmp_path / "ok", limit=2, depths="0,8").counts.errors == 0


@pytest.mark.slow
def test_card_shows_the_drift_line(tmp_path):
    from rolebound.card.build import section
    from rolebound.card.render import write_card
    from rolebound.suites import get_suite

    res = charm(tmp_path / "run", limit=4)
    sec = section("charm", get_suite("charm"), tmp_path / "run", res.metrics, tmp_path / "card", reused=True)
    assert sec["drift"]["depths"] == [0, 2]
    assert any(f["key"] == "drift/C-Gap/scripted" for f in sec["figures"])
    card = {"card": 1, "model": "fake:random", "judge": None, "demo": True, "created": "now", "rolebound": "0",
            "git": None, "suites": [sec]}
    write_card(card, tmp_path / "card")
    assert (tmp_path / "card" / "figures" / "charm-drift.png").stat().st_size > 1000
    assert "charm-drift.png" in (tmp_path / "card" / "card.md").read_text()
    assert "drift by dialogue depth" in (tmp_path / "card" / "card.html").read_text()


def test_a_bank_entry_without_source_or_note_is_refused_naming_file_and_field(tmp_path):
    from rolebound.dialogue.bank import load_bank
    from rolebound.errors import InputError

    path = tmp_path / "bank.yaml"
    path.write_text("generic:\n  - id: a\n    text: Hello.\n    note: ours\n  - id: b\n    text: Hi.\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_bank(str(path))
    assert str(path) in str(e.value) and "source" in str(e.value) and "generic" in str(e.value.field)
