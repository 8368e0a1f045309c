"""Stopping a run (issue 43, family 3): a second Ctrl-C stops it within seconds and still writes
what is done (manifest, records, report) with exit 130; SIGHUP acts as SIGTERM (143); every reply
that came back before the stop is in records.jsonl, and the manifest counts exactly those."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import SCRIPT, needs_script, write_mcq
from rolebound.testing.fake_server import FakeServer

pytestmark = [needs_script, pytest.mark.slow]


def records(out: Path) -> list[dict]:
    p = out / "records.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def start(args, env=None) -> subprocess.Popen:
    # a test run in the background (`&`, nohup) may have inherited an ignored SIGINT or SIGHUP, which
    # rolebound rightly leaves ignored: give the child both back
    return subprocess.Popen([str(SCRIPT), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})}, preexec_fn=default_stop_signals)


def default_stop_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def wait_for_records(out: Path, n: int, proc: subprocess.Popen, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while len(records(out)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "no records appeared"
        time.sleep(0.05)


def stop(proc: subprocess.Popen, *signals: int, gap: float = 0.05, within: float = 20) -> tuple[int, str, float]:
    t0 = time.monotonic()
    for k, sig in enumerate(signals):
        if k:
            time.sleep(gap)
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the run did not stop within {within} s of {signals}")
    return proc.returncode, err.strip(), time.monotonic() - t0


def one_line(err: str) -> str:
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def kept(out: Path) -> tuple[dict, list[dict]]:
    """The manifest, the records; the manifest counts exactly the replies recorded, and the folder
    is unlocked (the next command may take it)."""
    manifest = json.loads((out / "manifest.json").read_text())
    recs = records(out)
    assert manifest["finished"] is None
    assert manifest["counts"]["model_calls"] == len(recs), (manifest["counts"], len(recs))
    assert (out / "report.html").exists()
    with open(out / ".lock") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return manifest, recs


def fake_run(tmp_path: Path, n: int = 3000) -> tuple[list, Path]:
    data = write_mcq(tmp_path / "q.jsonl", n)
    out = tmp_path / "r"
    return ["run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "--quiet", "--no-cache"], out


# ROLEBOUND_FAKE_DELAY: each batch of the fake engine takes that long, so the stop lands mid-run
@pytest.mark.parametrize("signals, code, word", [
    ((signal.SIGINT,), 130, "interrupted"),
    ((signal.SIGINT, signal.SIGINT), 130, "interrupted"),
    ((signal.SIGHUP,), 143, "terminated"),
    ((signal.SIGTERM, signal.SIGINT), 143, "terminated"),
])
def test_a_stop_writes_what_is_done_and_counts_only_what_is_recorded(tmp_path, signals, code, word):
    args, out = fake_run(tmp_path)
    proc = start(args, env={"ROLEBOUND_FAKE_DELAY": "0.3"})
    wait_for_records(out, 1, proc)
    rc, err, took = stop(proc, *signals)
    assert rc == code, err
    assert one_line(err).startswith(word) and "rerun the same command to resume" in err
    assert took < 15
    _, recs = kept(out)
    assert 0 < len(recs) < 3000
    assert len({r["call_id"] for r in recs}) == len(recs) and not any(r["error"] for r in recs)


def test_the_run_resumes_after_a_double_ctrl_c(tmp_path):
    args, out = fake_run(tmp_path, n=1000)
    proc = start(args, env={"ROLEBOUND_FAKE_DELAY": "0.3"})
    wait_for_records(out, 1, proc)
    rc, err, _ = stop(proc, signal.SIGINT, signal.SIGINT)
    assert rc == 130, err
    _, recs = kept(out)
    again = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["finished"] and len({r["call_id"] for r in records(out)}) == 1000
    assert manifest["counts"]["model_calls"] == 1000        # summed over both invocations: each reply once


@pytest.mark.parametrize("signals", [(signal.SIGINT,), (signal.SIGINT, signal.SIGINT)])
def test_every_reply_an_api_server_sent_before_the_stop_is_kept(tmp_path, signals):
    data = write_mcq(tmp_path / "q.jsonl", 600)
    out = tmp_path / "r"
    with FakeServer(delay=0.2, reply="B") as srv:
        args = ["run", "mcq", "--model", "openai:test-model", "--base-url", srv.url + "/v1", "--data", data,
                "--scoring", "generate", "--out", out, "--quiet", "--no-cache", "--concurrency", "8"]
        proc = start(args)
        wait_for_records(out, 8, proc)
        rc, err, took = stop(proc, *signals)
        assert rc == 130, err
        one_line(err)
        answered = srv.stats.by_status.get(200, 0)
    _, recs = kept(out)
    assert len(recs) < 600
    # the second Ctrl-C may cut off calls still in flight, never a reply the server had sent
    assert len(recs) == answered or (len(signals) > 1 and len(recs) <= answered), (len(recs), answered)


def test_a_batch_cut_by_the_stop_is_no_failed_call():
    """A local engine's batch ended by the stop raises through run_safe (no per-item retry that
    would record every call as failed), and the dispatcher leaves those calls unanswered."""
    import asyncio

    from rolebound.models.base import GenRequest, GenResult
    from rolebound.loop import STOP, EngineStopped, check_stop
    from rolebound.models.engine_calls import run_safe
    from rolebound.records import Decoding
    from rolebound.runner import Dispatcher

    def batch(requests, decoding=None, emit=None):
        check_stop()
        return [GenResult(text="ok") for _ in requests]

    class Engine:
        batching = True

        async def generate(self, requests, decoding, emit=None):
            return run_safe(batch, requests, decoding, cls=GenResult, emit=emit)

    async def ask():
        return await Dispatcher(Engine()).generate(GenRequest(prompt="q"), Decoding())

    assert asyncio.run(ask()).text == "ok"
    STOP.set()
    try:
        with pytest.raises(EngineStopped):
            run_safe(batch, [1, 2], cls=GenResult)
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(ask())
    finally:
        STOP.clear()


@pytest.mark.model
def test_a_local_engine_stops_mid_batch_on_a_second_ctrl_c(tmp_path):
    """The bundled model on torch, 256 prompts in flight: before, the run waited for the engine's
    whole batch (over 120 s here) after two Ctrl-C, and counted 272 calls for 16 records."""
    data = write_mcq(tmp_path / "q.jsonl", 600)
    out = tmp_path / "r"
    proc = start(["run", "mcq", "--model", "bundled", "--engine", "torch", "--data", data, "--scoring", "generate",
                  "--out", out, "--quiet", "--no-cache"])
    wait_for_records(out, 1, proc, limit=300)
    rc, err, took = stop(proc, signal.SIGINT, signal.SIGINT, gap=0.1, within=60)
    assert rc == 130, err
    assert err.splitlines()[-1].startswith("interrupted") and "Traceback" not in err
    assert took < 30
    _, recs = kept(out)
    assert 0 < len(recs) < 600


def test_a_signal_before_the_loop_starts_stops_it_at_once_and_handlers_come_back():
    import asyncio
    import warnings

    from rolebound.loop import stop_signals

    inherited = signal.signal(signal.SIGHUP, signal.SIG_DFL)     # under nohup it comes in ignored
    before = signal.getsignal(signal.SIGHUP)

    async def work():
        await asyncio.sleep(30)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # no "coroutine was never awaited" on stderr
            with stop_signals() as state:
                os.kill(os.getpid(), signal.SIGHUP)    # while the run is being set up: waits for the loop
                with pytest.raises(asyncio.CancelledError):
                    asyncio.run(state.attach(work()))
    finally:
        after = signal.signal(signal.SIGHUP, inherited)
    assert state.code == 143
    assert after == before
