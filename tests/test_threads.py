"""Thread policy of the local engines (rolebound/threads.py): the automatic choice from load
inputs, the override order, the peer registry, and OMP_WAIT_POLICY reaching libgomp in time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import threads as T
from rolebound.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# -- the automatic choice ----------------------------------------------------------------------
@pytest.mark.parametrize("cores, others, peers, want", [
    (2, 0.0, 0, 2),          # idle machine: every core
    (2, 0.3, 0, 2),          # background noise is not a busy process
    (2, 1.0, 0, 1),          # one busy process: one thread (the second condition)
    (2, 0.6, 0, 1),
    (2, 1.9, 0, 1),          # never below 1
    (2, 0.0, 1, 1),          # another rolebound engine: half each (the third condition)
    (2, None, 0, 2),         # load unknown: every core
    (16, 1.0, 0, 15),        # a big machine keeps the free cores
    (16, 0.0, 3, 4),         # four engines share sixteen cores
    (16, 4.0, 1, 8),         # the stricter of the two rules
    (1, 0.0, 0, 1),
])
def test_choose_threads(cores, others, peers, want):
    n, why = T.choose_threads(cores, others, peers)
    assert n == want
    assert f"{cores} core" in why


def test_choose_threads_says_why():
    assert "busy with other processes" in T.choose_threads(2, 1.0, 0)[1]
    assert "1 other rolebound engine" in T.choose_threads(2, 0.0, 1)[1]
    assert "idle" in T.choose_threads(2, 0.0, 0)[1]


def test_others_busy_subtracts_our_own_cpu():
    assert T.others_busy(machine_busy_s=3.0, own_cpu_s=1.0, wall_s=2.0) == pytest.approx(1.0)
    assert T.others_busy(machine_busy_s=1.0, own_cpu_s=1.2, wall_s=1.0) == 0.0    # jiffy rounding
    assert T.others_busy(1.0, 0.0, 0.0) == 0.0


def test_read_cpu_times_counts_only_our_cores():
    tick = os.sysconf("SC_CLK_TCK")
    stat = ("cpu  400 0 200 1000 0 0 0 0 0 0\n"
            "cpu0 100 0 100 500 0 0 0 0 0 0\n"
            "cpu1 300 0 100 500 100 0 0 0 0 0\n"       # 100 iowait counts as idle
            "intr 12345\n")
    busy, total = T.read_cpu_times({1}, text=stat)
    assert busy == pytest.approx(400 / tick) and total == pytest.approx(1000 / tick)
    busy, total = T.read_cpu_times(None, text=stat)
    assert busy == pytest.approx(600 / tick)


# -- overrides -----------------------------------------------------------------------------------
def test_override_order_threads_option_then_env_then_omp():
    env = {"ROLEBOUND_THREADS": "2", "OMP_NUM_THREADS": "1"}
    assert T.resolve_override(3, env) == (3, "--threads")
    assert T.resolve_override(None, env) == (2, "ROLEBOUND_THREADS")
    assert T.resolve_override(None, {"OMP_NUM_THREADS": "1"}) == (1, "OMP_NUM_THREADS")
    assert T.resolve_override(None, {"ROLEBOUND_THREADS": "auto", "OMP_NUM_THREADS": "1"}) == (1, "OMP_NUM_THREADS")
    assert T.resolve_override(None, {}) == (None, "auto")


@pytest.mark.parametrize("bad", ["0", "two", "-1", "1.5"])
def test_bad_thread_counts_name_their_source(bad):
    with pytest.raises(InputError) as exc:
        T.resolve_override(None, {"ROLEBOUND_THREADS": bad})
    assert "ROLEBOUND_THREADS" in str(exc.value) and bad in str(exc.value)


def test_policy_applies_a_forced_count_and_records_why(monkeypatch):
    torch = pytest.importorskip("torch")
    p = T.ThreadPolicy()
    before = torch.get_num_threads()
    try:
        assert p.apply(1, "--threads") == 1 and torch.get_num_threads() == 1
        info = p.info()
        assert info["threads"] == 1 and info["source"] == "--threads" and info["why"] == "--threads=1"
    finally:
        torch.set_num_threads(before)


def test_an_automatic_choice_is_kept_for_the_run(monkeypatch):
    p = T.ThreadPolicy()
    loads = iter([0.0, 1.2])
    monkeypatch.setattr(p.sample, "others", lambda: next(loads))
    monkeypatch.setattr(T, "available_cores", lambda: 2)
    assert p.current() == (2, "2 cores available, machine otherwise idle")
    p.checked -= 10 * T.RECHECK_S
    assert p.current()[0] == 2                      # bf16 answers depend on the count: one per run
    assert "changes" not in p.info()


def test_adaptive_mode_rechecks_between_batches(monkeypatch):
    p = T.ThreadPolicy()
    loads = iter([0.0, 1.2])
    monkeypatch.setattr(p.sample, "others", lambda: next(loads))
    monkeypatch.setattr(T, "available_cores", lambda: 2)
    assert T.resolve_override(None, {"ROLEBOUND_THREADS": "adaptive"}) == (None, "adaptive")
    assert p.current(None, "adaptive")[0] == 2
    assert p.current(None, "adaptive")[0] == 2      # not looked at again before RECHECK_S
    p.checked -= T.RECHECK_S
    assert p.current(None, "adaptive")[0] == 1
    assert [c["threads"] for c in p.info()["changes"]] == [2, 1]


# -- the registry of engines ---------------------------------------------------------------------
def test_registry_counts_live_peers_and_drops_dead_ones(tmp_path):
    reg = T.Registry(tmp_path)
    reg.register()
    assert (tmp_path / str(os.getpid())).exists() and reg.peers() == 0
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        other = T.Registry._start_time(peer.pid)
        (tmp_path / str(peer.pid)).write_text(other)
        assert reg.peers() == 1
        old = os.stat(tmp_path / str(peer.pid)).st_mtime - T.ACTIVE_S - 5
        os.utime(tmp_path / str(peer.pid), (old, old))           # alive but idle: not a peer
        assert reg.peers() == 0 and (tmp_path / str(peer.pid)).exists()
        (tmp_path / str(peer.pid)).write_text("1")          # same pid, other start time: recycled
        assert reg.peers() == 0
        assert not (tmp_path / str(peer.pid)).exists()
    finally:
        peer.kill()
        peer.wait()
    (tmp_path / str(peer.pid)).write_text(other)            # a dead process
    assert reg.peers() == 0 and not (tmp_path / str(peer.pid)).exists()
    reg.unregister()
    assert not (tmp_path / str(os.getpid())).exists()


# -- OMP_WAIT_POLICY reaches libgomp -------------------------------------------------------------
def _spin_count(code: str) -> str:
    """libgomp's spin count as it reports it at load time (0 means passive waiting)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "GOMP_SPINCOUNT" in ln]
    if not lines:
        pytest.skip("this torch does not use libgomp")
    return lines[0].split("=")[1].strip().strip("'")


@pytest.mark.slow
def test_wait_policy_is_passive_before_torch_loads():
    pytest.importorskip("torch")
    # the CLI entry (what `rolebound run` imports first), then torch as the engine does
    assert _spin_count("import rolebound.cli, torch; torch.ones(64, 64) @ torch.ones(64, 64)") == "0"
    # the control: torch on its own spins (so the check above can fail)
    assert _spin_count("import torch; torch.ones(64, 64) @ torch.ones(64, 64)") != "0"


def test_a_wait_policy_the_user_set_is_kept():
    code = "import os, rolebound; print(os.environ['OMP_WAIT_POLICY'])"
    env = {**os.environ, "OMP_WAIT_POLICY": "ACTIVE"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.stdout.strip() == "ACTIVE"


@pytest.mark.slow
def test_bad_rolebound_threads_is_one_clear_line(tmp_path):
    env = {**os.environ, "ROLEBOUND_THREADS": "lots"}
    res = subprocess.run([str(Path(sys.executable).parent / "rolebound"), "run", "charm", "--limit", "2",
                          "--out", str(tmp_path / "r")], capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 2
    assert "ROLEBOUND_THREADS" in res.stderr and "lots" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
