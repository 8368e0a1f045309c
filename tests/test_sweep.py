"""`rolebound sweep`: the local executor, the index page and the compare card, bad input; and on a
real local Ray cluster (two CPU-only worker nodes, `ray` marker): equal records and metrics to the
local executor, a killed worker node with nothing lost or duplicated, one cap per endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import raw_tags

SCRIPT = Path(sys.executable).with_name("rolebound")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
VOLATILE = ("latency_s", "time")
MB = 1 << 20


def rb(*args, timeout=900, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def one_error(res, code: int) -> str:
    assert res.returncode == code, (res.returncode, res.stderr[-3000:])
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    lines = [x for x in res.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


def grid(path: Path, **fields) -> Path:
    import yaml

    base = {"suite": ["charm", "knowledge-errors"], "model": ["fake:random", "fake:echo"], "limit": 3,
            "cache": False}
    path.write_text(yaml.safe_dump({**base, **fields}), encoding="utf-8")
    return path


def records(run: Path) -> list[dict]:
    out = []
    for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for k in VOLATILE:
            rec.pop(k, None)
        out.append(rec)
    return sorted(out, key=lambda r: r["call_id"])


def metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text(encoding="utf-8"))


def runs_of(sweep_dir: Path) -> list[str]:
    return sorted(x["run"] for x in json.loads((sweep_dir / "index.json").read_text())["runs"])


def assert_same_runs(a: Path, b: Path) -> None:
    assert runs_of(a) == runs_of(b)
    for key in runs_of(a):
        ra, rb_ = records(a / key), records(b / key)
        ids = [r["call_id"] for r in rb_]
        assert len(ids) == len(set(ids)), f"{key}: a call recorded twice"
        assert ra == rb_, key
        assert metrics(a / key) == metrics(b / key), key


# -- local executor ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_local_sweep_writes_runs_index_and_compare_card_skips_finished_runs_and_equals_parallel(tmp_path):
    cfg = grid(tmp_path / "g.yaml")
    out = tmp_path / "sw"
    res = rb("sweep", cfg, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    assert len(runs_of(out)) == 4
    index = json.loads((out / "index.json").read_text())
    assert {x["status"] for x in index["runs"]} == {"done"}
    assert all(x["report"] and (out / x["report"]).exists() for x in index["runs"])
    assert (out / "compare" / "compare.html").exists() and index["compare"] == "compare/compare.html"
    cmp = json.loads((out / "compare" / "compare.json").read_text())
    assert cmp["columns"] == ["fake:random", "fake:echo"]
    html = (out / "index.html").read_text()
    assert "<script" not in html and "report.html" in html
    before = {k: (out / k / "records.jsonl").read_bytes() for k in runs_of(out)}
    again = rb("sweep", cfg, "--out", out, "-q")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("finished earlier (skipped)") == 4
    assert {k: (out / k / "records.jsonl").read_bytes() for k in runs_of(out)} == before
    # the same grid two runs at a time: the same records and metrics as one at a time
    res = rb("sweep", cfg, "--out", tmp_path / "par", "--parallel", "2", "-q")
    assert res.returncode == 0, res.stderr
    assert_same_runs(out, tmp_path / "par")


def test_index_escapes_what_it_shows(tmp_path):
    from rolebound.sweep.index import write_index
    from rolebound.sweep.plan import plan

    p = plan(grid(tmp_path / "g.yaml"), tmp_path / "sw")
    outcomes = {r.key: {"status": "error", "message": "<script>alert(1)</script> | *x*"} for r in p.runs}
    write_index(p, outcomes, executor="local", cards=[])
    html = (tmp_path / "sw" / "index.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    md = (tmp_path / "sw" / "index.md").read_text()
    assert raw_tags(md) == [] and "\\<script>" in md


@pytest.mark.slow
def test_unknown_executor_is_one_line_exit_2(tmp_path):
    line = one_error(rb("sweep", grid(tmp_path / "g.yaml"), "--executor", "slurm"), 2)
    assert "unknown executor 'slurm'" in line


@pytest.mark.slow
def test_bad_grid_names_the_file_before_anything_runs(tmp_path):
    cfg = grid(tmp_path / "g.yaml", strategy="nosuch")
    line = one_error(rb("sweep", cfg, "--out", tmp_path / "sw"), 2)
    assert str(cfg) in line and "nosuch" in line
    assert not (tmp_path / "sw").exists()


def test_plan_resources_come_from_the_backend(tmp_path):
    import yaml

    from rolebound.sweep.plan import plan

    cfg = tmp_path / "g.yaml"
    cfg.write_text(yaml.safe_dump({"suite": "charm", "model": ["vllm:/m/llama-70b", "bundled", "fake:random"],
                                   "backend": {"tensor_parallel_size": 4, "pipeline_parallel_size": 2}}))
    runs = {r.kwargs["model"]: r for r in plan(cfg).runs}
    v = runs["vllm:/m/llama-70b"]
    assert (v.gpus, v.gpu_bundles) == (8, True)
    assert runs["bundled"].gpus == 0 and runs["fake:random"].gpus == 0
    cfg.write_text(yaml.safe_dump({"suite": "charm", "model": "hf:/m/x", "backend": {"device": "cuda"}}))
    (h,) = plan(cfg).runs
    assert (h.gpus, h.gpu_bundles) == (1, False)


@pytest.mark.slow
def test_reports_rebuild_metrics_and_make_a_run_whose_report_fails_an_error(tmp_path):
    # what the Ray executor does on the driver as each task returns (rolebound.sweep.reports)
    from rolebound.sweep.plan import plan
    from rolebound.sweep.reports import Reports

    cfg = grid(tmp_path / "g.yaml", suite="charm")
    out = tmp_path / "sw"
    assert rb("sweep", cfg, "--out", out, "-q").returncode == 0
    good, bad = plan(cfg, out).runs
    want = metrics(good.out)
    for r in (good, bad):
        (r.out / "metrics.json").unlink()
    with (bad.out / "records.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"call_id": "x"}\n')                    # whole JSON, not a record
    outcomes = {good.key: {"status": "done", "exit_code": 0}, bad.key: {"status": "done", "exit_code": 0},
                "gone": {"status": "error", "exit_code": 3, "message": "the Ray task failed"}}
    with Reports() as reports:
        reports.submit(good, outcomes[good.key])
        reports.submit(bad, outcomes[bad.key])
        reports.submit(bad, outcomes["gone"])               # a failed task: nothing is built
    assert metrics(good.out) == want and (good.out / "report.html").exists()
    assert outcomes[good.key] == {"status": "done", "exit_code": 0}
    assert outcomes[bad.key]["status"] == "error" and outcomes[bad.key]["exit_code"] == 3
    assert outcomes[bad.key]["message"].startswith("report: ")
    assert outcomes["gone"]["message"] == "the Ray task failed"


def test_ray_tasks_take_rolebound_variables_but_no_secrets(monkeypatch):
    from rolebound.sweep.ray_exec import task_env

    for k in ("ROLEBOUND_API_KEY", "ROLEBOUND_HUB_TOKEN", "ROLEBOUND_SECRET", "NOT_ROLEBOUND"):
        monkeypatch.setenv(k, "x")
    monkeypatch.setenv("ROLEBOUND_THREADS", "1")
    env = task_env()
    assert env["ROLEBOUND_THREADS"] == "1"
    assert not {"ROLEBOUND_API_KEY", "ROLEBOUND_HUB_TOKEN", "ROLEBOUND_SECRET", "NOT_ROLEBOUND"} & set(env)


# -- Ray --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # the head takes no task (the driver, the sink and the limiter live there); two 1-CPU workers.
    # Ray gives a raylet 30 s to register: on a crowded machine, try again. Its OOM killer looks at
    # the whole machine's memory, which other people's work fills here: off for this cluster.
    saved = os.environ.get("RAY_memory_monitor_refresh_ms")
    os.environ["RAY_memory_monitor_refresh_ms"] = "0"
    for attempt in range(3):
        c = Cluster(initialize_head=False)
        try:
            c.add_node(num_cpus=0, object_store_memory=100 * MB, include_dashboard=False)
            c.workers_ = [c.add_node(num_cpus=1, object_store_memory=100 * MB, memory=1 << 30) for _ in range(2)]
            c.wait_for_nodes()
            break
        except Exception:  # noqa: BLE001
            c.shutdown()
            if attempt == 2:
                raise
    yield c
    c.shutdown()
    if saved is None:
        os.environ.pop("RAY_memory_monitor_refresh_ms", None)
    else:
        os.environ["RAY_memory_monitor_refresh_ms"] = saved


def ray_sweep(cluster, *args, **kw):
    return rb("sweep", *args, "--executor", "ray", "--address", cluster.address, "-q", **kw)


@pytest.mark.ray
@pytest.mark.model
def test_ray_sweep_equals_local_sweep(cluster, tmp_path):
    # knowledge-errors on Ray: test_killed_worker_node_loses_and_duplicates_nothing compares it too
    fake = grid(tmp_path / "fake.yaml", suite="charm")
    bundled = grid(tmp_path / "bundled.yaml", suite="charm", model="bundled", limit=2)
    env = {**os.environ, "ROLEBOUND_THREADS": "1"}   # the same thread count both ways: bf16 sums depend on it
    # both sweeps at once: the Ray one waits on its workers for much of its time
    procs = {k: subprocess.Popen([str(SCRIPT), *map(str, a)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
             for k, a in {"local": ["sweep", fake, bundled, "--out", tmp_path / "local", "-q"],
                          "ray": ["sweep", fake, bundled, "--executor", "ray", "--address", cluster.address,
                                  "--out", tmp_path / "ray", "-q"]}.items()}
    for key, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, (key, err[-3000:])
    assert len(runs_of(tmp_path / "ray")) == 3
    assert_same_runs(tmp_path / "local", tmp_path / "ray")
    assert (tmp_path / "ray" / "compare" / "compare.html").exists()


@pytest.mark.slow
@pytest.mark.ray
def test_killed_worker_node_loses_and_duplicates_nothing(cluster, tmp_path):
    cfg = grid(tmp_path / "g.yaml", limit=6)
    assert rb("sweep", cfg, "--out", tmp_path / "ref", "-q").returncode == 0
    out = tmp_path / "ray"
    env = {**os.environ, "ROLEBOUND_FAKE_DELAY": "0.4"}      # slow enough to be caught mid-run
    proc = subprocess.Popen([str(SCRIPT), "sweep", str(cfg), "--executor", "ray", "--address", cluster.address,
                             "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if sum(1 for _ in out.glob("*/records.jsonl") if _.stat().st_size) >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        victim = cluster.workers_.pop(0)
        cluster.remove_node(victim)                     # SIGKILL: raylet and its workers
        cluster.workers_.append(cluster.add_node(num_cpus=1, object_store_memory=100 * MB, memory=1 << 30))
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    again = rb("sweep", cfg, "--executor", "ray", "--address", cluster.address, "--out", out, "-q")
    assert again.returncode == 0, (err[-2000:], again.stderr[-2000:])
    assert_same_runs(tmp_path / "ref", out)


@pytest.mark.slow
@pytest.mark.ray
def test_runs_on_one_endpoint_share_its_cap_across_the_cluster(cluster, tmp_path):
    from rolebound.testing.fake_server import FakeServer

    with FakeServer(delay=0.1, reply="Answer: 1") as srv:
        # two runs at once (one a worker) on one endpoint, each allowed 8 in flight: 16 wanted, 8 allowed
        cfg = grid(tmp_path / "g.yaml", model="openai:m1", limit=12, judge="self",
                   backend={"base_url": srv.url + "/v1", "concurrency": 8})
        res = ray_sweep(cluster, cfg, "--out", tmp_path / "sw")
        assert res.returncode == 0, res.stdout
        assert srv.stats.requests > 8 * 4, srv.stats.requests
        assert srv.stats.max_in_flight <= 8


@pytest.mark.slow
@pytest.mark.ray
def test_unreachable_address_is_one_line_exit_2(tmp_path):
    pytest.importorskip("ray")
    line = one_error(rb("sweep", grid(tmp_path / "g.yaml"), "--executor", "ray", "--address", "127.0.0.1:9",
                        timeout=10), 2)
    assert "127.0.0.1:9" in line and "--address" in line


@pytest.mark.slow
@pytest.mark.ray
def test_gpu_runs_on_a_cluster_without_gpus_say_so(cluster, tmp_path):
    import yaml

    cfg = tmp_path / "g.yaml"
    cfg.write_text(yaml.safe_dump({"suite": "charm", "model": "vllm:/m/llama-70b",
                                   "backend": {"tensor_parallel_size": 2}}))
    line = one_error(ray_sweep(cluster, cfg, "--out", tmp_path / "sw", timeout=120), 2)
    assert "needs 2 GPU(s)" in line and "no GPU" in line


@pytest.mark.slow
def test_without_ray_the_ray_executor_gives_the_install_hint(tmp_path):
    shadow = tmp_path / "shadow" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    line = one_error(rb("sweep", grid(tmp_path / "g.yaml"), "--executor", "ray",
                        env={"PYTHONPATH": str(shadow.parent)}), 2)
    assert "pip install 'rolebound[ray]'" in line


@pytest.mark.slow
@pytest.mark.ray
def test_ray_tasks_run_with_the_drivers_rolebound_variables(cluster, tmp_path):
    # the worker nodes were started without it: only the driver's environment can carry it
    cfg = grid(tmp_path / "g.yaml", suite="charm", model="fake:random", limit=2)
    res = ray_sweep(cluster, cfg, "--out", tmp_path / "sw", env={"ROLEBOUND_FAKE_FAIL": "."})
    assert res.returncode == 3, res.stderr[-2000:]
    (row,) = json.loads((tmp_path / "sw" / "index.json").read_text())["runs"]
    assert row["failed_calls"] and "ROLEBOUND_FAKE_FAIL" in (tmp_path / "sw" / row["run"] / "errors.log").read_text()
