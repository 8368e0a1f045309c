"""Runner, store and cache behaviour with the deterministic fake backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rolebound import api
from rolebound.errors import RoleboundError
from rolebound.store import RunDir, load_records

from helpers import write_mcq


def run(data, out, **kw):
    kw.setdefault("model", "fake:random")
    return api.run("mcq", data=str(data), out=out, progress=False, **kw)


def test_run_directory_has_manifest_records_metrics_report(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 12)
    res = run(data, tmp_path / "run", scoring="generate")
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["suite"] == "mcq" and m["model"] == "fake:random" and m["backend"] == "fake"
    assert m["strategies"] == ["direct"] and m["n_items"] == 12 and len(m["dataset_hash"]) == 16
    assert m["decoding"]["temperature"] == 0.0 and m["prompt_templates"]["mcq"]
    assert m["package_version"] and m["started"] and m["finished"]
    assert m["counts"]["model_calls"] == 12 and m["counts"]["failed_calls"] == 0
    recs = load_records(tmp_path / "run")
    assert len(recs) == 12
    r = recs[0]
    assert r.prompt and r.response is not None and r.parsed is not None and r.latency_s is not None
    assert r.gold in "ABCD" and isinstance(r.correct, bool)
    assert (tmp_path / "run" / "metrics.json").exists()
    assert {p.name for p in res.report_paths} == {"report.md", "report.html"}


def test_rerun_of_finished_run_makes_no_model_calls(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 10)
    run(data, tmp_path / "run")
    again = run(data, tmp_path / "run")
    assert again.counts.calls == 0 and again.counts.resumed == 10
    # and nothing was appended
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 10


def test_response_cache_is_shared_across_runs_and_can_be_bypassed(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 8)
    first = run(data, tmp_path / "a")
    assert first.counts.calls == 8
    second = run(data, tmp_path / "b")
    assert second.counts.calls == 0 and second.counts.cache_hits == 8
    assert all(r.cached for r in load_records(tmp_path / "b"))
    third = run(data, tmp_path / "c", use_cache=False)
    assert third.counts.calls == 8 and third.counts.cache_hits == 0


def test_cache_key_includes_decoding(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 4)
    run(data, tmp_path / "a", scoring="generate")
    other = run(data, tmp_path / "b", scoring="generate", decoding={"temperature": 0.7})
    assert other.counts.calls == 4


def test_local_engine_revision_is_part_of_the_cache_key(monkeypatch):
    # answers cached by an older local engine must not mix into a run of the new one
    from rolebound.models import local
    from rolebound.models.bundled import BundledBackend
    from rolebound.runner import Session

    b = BundledBackend("smollm2-135m")
    key = lambda: Session.cache_key(None, b, "score", {"x": 1}, None, 0)  # noqa: E731
    before = key()
    monkeypatch.setattr(local, "ENGINE_REV", local.ENGINE_REV + 1)
    assert key() != before


def test_failed_calls_are_recorded_counted_and_retried_on_resume(tmp_path, monkeypatch):
    data = write_mcq(tmp_path / "q.jsonl", 12)
    monkeypatch.setenv("ROLEBOUND_FAKE_FAIL", r"Question number (3|7)\?")
    res = run(data, tmp_path / "run")
    assert res.counts.errors == 2 and res.counts.items_failed == 2
    failed = [r for r in load_records(tmp_path / "run") if r.error]
    assert {r.item_id for r in failed} == {"q3", "q7"} and "InjectedFailure" in failed[0].error
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["by_strategy"]["direct"]["n"] == 10
    assert (tmp_path / "run" / "errors.log").exists()
    monkeypatch.delenv("ROLEBOUND_FAKE_FAIL")
    again = run(data, tmp_path / "run")
    assert again.counts.calls == 2 and again.counts.resumed == 10 and again.counts.errors == 0
    latest = load_records(tmp_path / "run")
    assert len(latest) == 12 and not any(r.error for r in latest)
    assert len(load_records(tmp_path / "run", latest=False)) == 14   # append-only history


def test_resuming_a_different_run_is_refused(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 4)
    run(data, tmp_path / "run")
    with pytest.raises(RoleboundError, match="model"):
        run(data, tmp_path / "run", model="fake:echo")
    # --overwrite starts again
    res = run(data, tmp_path / "run", model="fake:echo", overwrite=True)
    assert res.counts.calls == 4


def test_local_requests_are_batched(tmp_path):
    from rolebound.models import create_backend
    from rolebound.records import Decoding
    from rolebound.runner import Session
    from rolebound.suites import get_suite
    import asyncio

    data = write_mcq(tmp_path / "q.jsonl", 40)
    suite = get_suite("mcq")
    settings = suite.run_settings(["direct"], scoring="logprob")
    ds = suite.load(str(data), settings)
    backend = create_backend("fake:random")
    rd = RunDir(tmp_path / "run")
    rd.open_for_append()
    session = Session(rd, "mcq", backend, Decoding(), use_cache=False)
    from rolebound.runner import Plan, execute

    assert execute(suite, Plan(settings, backend, concurrency=64), ds, ds.items, session, progress=False) is None
    rd.close()
    assert sum(backend.batch_sizes) == 40 and max(backend.batch_sizes) > 1


def test_torn_last_line_is_repaired(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 6)
    run(data, tmp_path / "run")
    path = tmp_path / "run" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # simulate a kill mid-write: the last record is cut in half
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    again = run(data, tmp_path / "run")
    assert again.counts.calls + again.counts.cache_hits == 1 and again.counts.resumed == 5
    recs = load_records(tmp_path / "run", latest=False)
    assert len(recs) == 6 and len({r.call_id for r in recs}) == 6


@pytest.mark.slow
def test_kill_minus_9_mid_run_then_resume(tmp_path):
    """A real process killed with SIGKILL: nothing recorded is lost or duplicated on resume."""
    data = write_mcq(tmp_path / "q.jsonl", 60)
    out = tmp_path / "run"
    env = {**os.environ, "ROLEBOUND_FAKE_DELAY": "0.05"}
    cmd = [sys.executable, "-m", "rolebound.cli", "run", "mcq", "--model", "fake:random", "--data", str(data),
           "--out", str(out), "--concurrency", "1", "--quiet", "--no-cache"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / "records.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 15:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {json.loads(line)["call_id"] for line in records.read_text().splitlines() if line.endswith("}")}
    assert 15 <= len(before) < 60
    res = subprocess.run(cmd, env={**os.environ}, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    recs = load_records(out, latest=False)
    ids = [r.call_id for r in recs]
    assert len(ids) == len(set(ids)) == 60          # no duplicates, nothing missing
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["model_calls"] == 60 - len(before) and m["counts"]["resumed"] == len(before)


def test_streaming_backend_results_arrive_per_batch():
    """A local engine hands answers over as each batch finishes: the first answer is usable
    while the engine is still busy with the rest."""
    import asyncio
    import threading

    from rolebound.models.base import Backend, ScoreRequest, ScoreResult
    from rolebound.runner import Dispatcher

    release = threading.Event()

    class Streaming(Backend):
        batching = True
        streams = True

        async def score(self, requests, emit=None):
            def work():
                emit(0, ScoreResult(logprobs=[0.0]))
                assert release.wait(5), "the first answer never reached the caller"
                return [ScoreResult(logprobs=[float(i)]) for i in range(len(requests))]
            return await asyncio.to_thread(work)

    async def main():
        d = Dispatcher(Streaming("x"))
        futs = [asyncio.ensure_future(d.score(ScoreRequest(continuations=["a"], prompt=str(i)))) for i in range(3)]
        first = await asyncio.wait_for(futs[0], 5)          # arrives before the batch ends
        release.set()
        rest = await asyncio.gather(*futs[1:])
        return first, rest

    first, rest = asyncio.run(main())
    assert first.logprobs == [0.0] and [r.logprobs for r in rest] == [[1.0], [2.0]]
