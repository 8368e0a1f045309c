"""Every registered suite keeps the framework's contract on `fake:` backends: a run's metrics are
rebuilt identically from its records, a rerun resumes without calls, and an unknown --set key
stops the run before anything is written (exit 2, naming the key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.suites import available

from helpers import write_mcq

pytestmark = pytest.mark.slow     # processes, servers or whole pipelines: not in `make test-fast`

# What keeps each built-in suite's fake run small; other suites run with their defaults.
SMALL = {
    "charm": {"options": {"similarity": False}},
    "knowledge-errors": {"strategies": "vanilla", "options": {"hidden_states": False}},
    "multiverse": {"options": {"analysis": False}},
    "capability": {"strategies": "identity,no-role"},
}
SCRIPT = Path(sys.executable).parent / "rolebound"


def _kwargs(name: str, tmp_path: Path) -> dict:
    kw = dict(SMALL.get(name, {}))
    if name == "mcq":
        kw["data"] = str(write_mcq(tmp_path / "q.jsonl", 6))
    return kw


def _changed(a, b, path: str = "") -> list[str]:
    """The dotted paths where two metrics dicts differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b), key=str) for p in _changed(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _dump(metrics: dict) -> str:
    return json.dumps(metrics, sort_keys=True, default=str)


@pytest.mark.parametrize("name", available())
def test_run_report_rebuild_and_resume(name, tmp_path):
    out = tmp_path / "run"
    kw = _kwargs(name, tmp_path)
    res = api.run(name, model="fake:random", limit=4, out=out, progress=False, **kw)
    assert res.counts.calls > 0 and res.counts.errors == 0
    written = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert res.report_paths and all(p.exists() for p in res.report_paths)

    rebuilt, paths = api.build_report(out)               # from records.jsonl alone
    assert _dump(rebuilt) == _dump(written)
    assert paths

    again = api.run(name, model="fake:random", limit=4, out=out, progress=False, **kw)
    assert again.counts.calls == 0 and again.counts.resumed == res.counts.calls
    assert _dump(json.loads((out / "metrics.json").read_text(encoding="utf-8"))) == _dump(written)


@pytest.mark.parametrize("name", available())
def test_metrics_are_a_function_of_the_set_of_records(name, tmp_path):
    """Shuffled records.jsonl (the order calls finished in differs run to run, at any -c), then
    `rolebound report`: metrics.json is the same, bootstrap CIs included."""
    import random

    out = tmp_path / "run"
    kw = _kwargs(name, tmp_path)
    if name == "multiverse":
        kw.pop("options")           # keep its judged analysis: its most common score pair counts too
    api.run(name, model="fake:random", limit=6, out=out, progress=False, **kw)
    written = _dump(json.loads((out / "metrics.json").read_text(encoding="utf-8")))
    lines = (out / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(1).shuffle(lines)
    (out / "records.jsonl").write_text("".join(lines), encoding="utf-8")
    res = subprocess.run([str(SCRIPT), "report", str(out), "--quiet"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _changed(json.loads(written), json.loads((out / "metrics.json").read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("name", available())
def test_unknown_option_exits_2_before_any_folder(name, tmp_path):
    out = tmp_path / "run"
    extra = ["--data", _kwargs(name, tmp_path)["data"]] if name == "mcq" else []
    res = subprocess.run([str(SCRIPT), "run", name, "--model", "fake:random", "--set", "bogus=1",
                          "--out", str(out), *extra], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ})
    assert res.returncode == 2, res.stderr
    assert "bogus" in res.stderr and "valid options" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_grid_checks_every_runs_options_before_the_first_run(tmp_path):
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(f"suite: [charm, capability]\nmodel: fake:random\nlimit: 2\nout: {tmp_path / 'g'}\n"
                   "options: {similarity: false}\n", encoding="utf-8")
    res = subprocess.run([str(SCRIPT), "run", "--config", str(cfg)], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2 and "unknown option 'similarity' for suite capability" in res.stderr
    assert not (tmp_path / "g").exists()


# What a suite object may keep across runs: neither is read by a later step of the run.
KEPT = {"_template_src"}      # mcq: the template text prompt_templates() hashes (it takes no settings)


@pytest.mark.parametrize("name", available())
def test_no_run_state_on_the_suite_object(name, tmp_path, monkeypatch):
    """Everything load() or check() work out for later steps is in the run's settings."""
    from rolebound.suites import get_suite

    suite = get_suite(name)
    monkeypatch.setattr(api, "get_suite", lambda _name: suite)
    api.run(name, model="fake:random", limit=4, out=tmp_path / "run", progress=False, **_kwargs(name, tmp_path))
    assert set(vars(suite)) <= KEPT
