"""Hostile input, second round (issue 52), through the installed script: control characters from a
server or a manifest never reach the terminal or errors.log raw; files rolebound wrote and reads back
(an inspect log, metrics.json, rolebound.json, an embedder folder) are validated as input, one
line naming file and field; card figures outside their domain are refused; a torn last record, a
log that inflates to gigabytes, a full disk, a cache path that is a file, absurd Retry-After values
and 120 KB option values each give one clear line."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import pytest

from rolebound import api
from rolebound.testing.fake_server import FakeServer

from helpers import needs_script, rolebound, write_mcq

ESC = "\x1b[2J\x1b]0;pwned\x07\x1b[31mFAKE: all tests passed"


def one_line(res, code: int) -> str:
    """The command's only stderr line (exit `code`, no traceback, no raw control character)."""
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and len(err.splitlines()) == 1, err[-2000:]
    assert not any(ord(c) < 32 for c in err), err
    return err


def no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]
    assert not bad, repr(text[:500])


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 3)


@pytest.fixture(scope="module")
def charm_run(tmp_path_factory) -> Path:
    """A small finished charm run (fake model): a manifest and metrics.json to edit. Made in-process:
    the tests run the script on copies of it."""
    out = tmp_path_factory.mktemp("charm") / "run"
    api.run("charm", model="fake:random", limit=6, options={"similarity": False}, out=out, progress=False)
    return out


def copy_run(src: Path, dest: Path, **manifest) -> Path:
    shutil.copytree(src, dest)
    if manifest:
        m = json.loads((dest / "manifest.json").read_text())
        (dest / "manifest.json").write_text(json.dumps({**m, **manifest}))
    if "model" in manifest:     # the records name the same model, or the run is refused as mixed (family 6)
        recs = [json.loads(x) for x in (dest / "records.jsonl").read_text().splitlines() if x.strip()]
        (dest / "records.jsonl").write_text("".join(
            json.dumps({**r, "model": manifest["model"]} if r.get("role", "model") == "model" else r) + "\n"
            for r in recs))
    return dest


# -- 4. control characters --------------------------------------------------------------------------
def test_visible_escapes_c0_c1_esc_and_del_and_keeps_newlines_where_asked():
    from rolebound.term import visible

    assert visible("a\x1b[2Jb\x07\x7f\x9b\u202e\tc\nd") == "a\\x1b[2Jb\\x07\\x7f\\x9b\\u202e\tc\nd"
    assert visible("one\ntwo\r", newlines=False) == "one\\x0atwo\\x0d"


@pytest.mark.slow
@needs_script
def test_a_servers_escape_sequences_are_escaped_on_stderr_and_in_errors_log(tmp_path, data):
    with FakeServer() as srv:
        srv.fail(status=401, message=ESC)
        res = rolebound("run", "mcq", "--model", "openai:m", "--base-url", srv.url + "/v1", "--data", data,
                        "--out", tmp_path / "r", "--quiet")
    err = one_line(res, 3)
    assert "HTTP 401: \\x1b[2J\\x1b]0;pwned\\x07\\x1b[31mFAKE" in err
    log = (tmp_path / "r" / "errors.log").read_text(encoding="utf-8")
    no_controls(log)
    assert "\\x1b[31mFAKE: all tests passed" in log


@pytest.mark.slow
@needs_script
def test_a_manifests_model_name_is_escaped_in_compare_tables_and_the_card_error(tmp_path, charm_run):
    run = copy_run(charm_run, tmp_path / "run", model="fake:random" + ESC)
    res = rolebound("compare", run, "--paper", "--out", tmp_path / "cmp")
    assert res.returncode == 0, res.stderr
    no_controls(res.stdout + res.stderr)
    assert "\\x1b[2J" in res.stdout
    paired = rolebound("compare", charm_run, run, "--out", tmp_path / "paired")     # the paired lines too
    assert paired.returncode == 0, paired.stderr
    no_controls(paired.stdout + paired.stderr)
    assert "fake:random\\x1b[2J" in paired.stdout
    card = rolebound("card", "--model", "fake:random", "--runs", run, "--out", tmp_path / "card")
    assert "a run of model fake:random\\x1b[2J" in one_line(card, 2)


# -- 5. files rolebound wrote, read back as input ----------------------------------------------------
METRICS_EDITS = {
    "a list": (lambda m: [1, 2], "metrics.json: expected a JSON object, got list"),
    "position_bias a string": (lambda m: {**m, "position_bias": "x"}, "field 'position_bias'"),
    "a dialogue without metrics": (lambda m: {**m, "dialogue": {"depths": [0, 4], "names": ["x"]}},
                                   "field 'dialogue.metrics': Field required"),
    "a malformed drift entry": (lambda m: {**m, "dialogue": {"depths": [0, 4], "names": ["x"], "metrics": {"x": {"k": 5}}}},
                                "field 'dialogue.metrics.x.k'"),
    # 6 (last bullet): figures outside their domain
    "warnings a string": (lambda m: {**m, "position_bias": {**m["position_bias"], "warnings": "abc"}},
                          "field 'position_bias.warnings': Input should be a valid list"),
    "a rate of 1e308": (lambda m: _rate(m, rate=1e308), "figure 'ba': value 1e+308 is outside [0, 100] (%)"),
    "a rate of NaN": (lambda m: _rate(m, rate=float("nan")), "figure 'ba': value nan is outside"),
    "n = -5": (lambda m: _rate(m, n=-5), "figure 'ba': n is -5, not a count"),
}


def _rate(m: dict, **kw) -> dict:
    m["stage_accuracy"]["ba/all"].update(kw)
    return m


def edited_run(tmp_path: Path, charm_run: Path, edit: str) -> tuple[Path, str]:
    run = copy_run(charm_run, tmp_path / "run")
    change, says = METRICS_EDITS[edit]
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps(change(metrics)))
    return run, says


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("edit", ["a list", "warnings a string", "a rate of 1e308"])
def test_card_runs_refuses_a_hand_edited_metrics_json_in_one_line(tmp_path, charm_run, edit):
    run, says = edited_run(tmp_path, charm_run, edit)
    res = rolebound("card", "--model", "fake:random", "--runs", run, "--out", tmp_path / "card")
    err = one_line(res, 2)
    assert str(run / "metrics.json") in err and says in err, err
    assert not (tmp_path / "card").exists()         # stopped before any model call or file


@needs_script
@pytest.mark.parametrize("edit", list(METRICS_EDITS))
def test_every_hand_edit_of_metrics_json_is_refused_where_it_is_read(tmp_path, charm_run, edit):
    """What `card --runs` reads of each reused run, before any model call (card/build.py)."""
    from rolebound.card.build import card_figures, run_metrics
    from rolebound.errors import InputError
    from rolebound.suites import get_suite

    run, says = edited_run(tmp_path, charm_run, edit)
    with pytest.raises(InputError) as info:
        card_figures(get_suite("charm"), run_metrics(run), run)
    assert str(run / "metrics.json") in str(info.value) and says in str(info.value), str(info.value)


@pytest.mark.slow
@needs_script
def test_hf_dir_with_a_rolebound_json_that_is_a_list_is_one_line(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "rolebound.json").write_text("[1, 2]")
    res = rolebound("run", "charm", "--model", "fake:random", "--data", f"hf:{tmp_path / 'exp'}",
                    "--out", tmp_path / "r")
    assert "rolebound.json: Input should be a valid dictionary" in one_line(res, 2)


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("how", ["env", "set", "malformed"])
def test_an_embedder_path_that_is_no_model_folder_is_one_line(tmp_path, how):
    env = dict(os.environ)
    args = ["run", "charm", "--model", "fake:random", "--limit", "2", "--out", tmp_path / "r"]
    if how == "env":
        env["ROLEBOUND_EMBEDDER"] = "/etc"
    elif how == "set":
        args = ["run", "multiverse", "--model", "fake:random", "--limit", "2", "--out", tmp_path / "r",
                "--set", "embedder=/etc/hostname"]
    else:
        bad = tmp_path / "model"
        bad.mkdir()
        (bad / "modules.json").write_text('[{"idx": 0, "name": "0", "path": "", "type": ')
        env["ROLEBOUND_EMBEDDER"] = str(bad)
    err = one_line(rolebound(*args, env=env), 2)
    # a variable or a flag is named bare, as the user typed it (issue 53)
    where = {"env": "/etc, ROLEBOUND_EMBEDDER", "set": "/etc/hostname, --set embedder",
             "malformed": "model, ROLEBOUND_EMBEDDER: cannot be loaded"}[how]
    assert where in err, err


# -- the inspect log and tasks -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def inspect_log(tmp_path_factory) -> Path:
    """A JSON inspect log of `rolebound/charm` on mockllm (3 samples)."""
    pytest.importorskip("inspect_ai")
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    from rolebound.inspect import _registry  # noqa: F401 - the tasks without the entry point

    def outputs():
        while True:
            yield ModelOutput.from_content(model="mockllm", content="Answer: 1")

    model = get_model("mockllm/model", custom_outputs=outputs(), memoize=False)
    folder = tmp_path_factory.mktemp("logs")
    [log] = inspect_eval("rolebound/charm", model=model, limit=3, log_dir=str(folder), display="none",
                         log_format="json", task_args={"set": "similarity=false"})
    assert log.status == "success", log.error
    return Path(log.location)


def _meta(d):
    return d["eval"]["metadata"]["rolebound"]


def _records(d):
    return d["samples"][0]["scores"]["rolebound_score"]["metadata"]


LOG_EDITS = {
    "temperature hot": (lambda d: _meta(d)["decoding"].update(temperature="hot"),
                        "field 'eval.metadata.rolebound.decoding.temperature'"),
    "metadata a string": (lambda d: d["eval"]["metadata"].update(rolebound="x"), "field 'eval.metadata.rolebound'"),
    "no decoding": (lambda d: _meta(d).pop("decoding"), "field 'eval.metadata.rolebound.decoding': Field required"),
    "a NaN log-prob": (lambda d: _records(d)["records"][0].update(kind="score", continuations=["A"],
                                                                  logprobs=[float("nan")]),
                       "records[0].logprobs': nan is not a log-prob"),
    "dataset_hash null": (lambda d: _meta(d).update(dataset_hash=None), "field 'eval.metadata.rolebound.dataset_hash'"),
    "records [5]": (lambda d: _records(d).update(records=[5]),
                    "field 'samples[0].scores.rolebound_score.metadata.records[0]'"),
}


def edited_log(tmp_path: Path, inspect_log: Path, edit: str) -> tuple[Path, str]:
    change, says = LOG_EDITS[edit]
    d = json.loads(inspect_log.read_text(encoding="utf-8"))
    change(d)
    log = tmp_path / "edited.json"
    log.write_text(json.dumps(d))
    return log, says


@pytest.mark.slow
@needs_script
def test_import_inspect_refuses_a_hand_edited_log_in_one_line(tmp_path, inspect_log):
    log, says = edited_log(tmp_path, inspect_log, "temperature hot")
    err = one_line(rolebound("import", "inspect", log, "--out", tmp_path / "run"), 2)
    assert err.startswith(f"error: {log}, ") and says in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("edit", list(LOG_EDITS))
def test_every_hand_edit_of_an_inspect_log_names_the_log_and_the_field(tmp_path, inspect_log, edit):
    from rolebound.errors import InputError
    from rolebound.inspect.logs import import_log

    log, says = edited_log(tmp_path, inspect_log, edit)
    with pytest.raises(InputError) as info:
        import_log(log, tmp_path / "run")
    assert str(info.value).startswith(f"{log}, ") and says in str(info.value), str(info.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@needs_script
def test_an_eval_log_that_inflates_past_its_bound_is_refused_before_reading(tmp_path):
    pytest.importorskip("inspect_ai")
    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z, z.open("header.json", "w", force_zip64=True) as f:
        for _ in range(48):
            f.write(b" " * (1 << 20))            # 48 MiB of spaces: about 50 KB packed
    assert bomb.stat().st_size < 1 << 20
    err = one_line(rolebound("import", "inspect", bomb, "--out", tmp_path / "run"), 2)
    assert "header.json inflates" in err and "zip bomb" in err


def test_an_inspect_tasks_limit_must_be_a_whole_number_from_1():
    pytest.importorskip("inspect_ai")
    from inspect_ai._util.error import PrerequisiteError

    from rolebound.errors import InputError
    from rolebound.inspect import tasks

    for bad, says in (("abc", "expected a whole number of items, got 'abc'"), (-5, "must be 1 or more, got -5"),
                      ("-5", "must be 1 or more"), (True, "expected a whole number")):
        with pytest.raises(InputError, match=says) as info:
            tasks.charm(limit=bad)
        # inspect's CLI prints a PrerequisiteError as its message alone, with no traceback
        assert isinstance(info.value, PrerequisiteError) and info.value.message.startswith("error: field 'limit'")


# -- 7. recovery and messages ------------------------------------------------------------------------
@pytest.mark.slow
@needs_script
def test_a_torn_last_line_is_read_past_by_report_and_cut_by_run_each_with_one_warning(tmp_path, data):
    out = tmp_path / "r"
    args = ["run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "--quiet"]
    assert rolebound(*args).returncode == 0
    path = out / "records.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[:-40])                 # a kill mid-write: the last record cut short
    rep = rolebound("report", out)
    assert rep.returncode == 0, rep.stderr
    warn = rep.stderr.strip().splitlines()
    assert len(warn) == 1 and warn[0].startswith(f"warning: {path}:3: a torn last line") and "read past" in warn[0]
    assert path.read_bytes() == whole[:-40]       # a report never writes records.jsonl
    again = rolebound(*args)
    assert again.returncode == 0
    warn = again.stderr.strip().splitlines()
    assert len(warn) == 1 and "a torn last line" in warn[0] and "it is cut" in warn[0]
    assert len(path.read_text().splitlines()) == 3


def test_a_full_disk_under_the_response_cache_says_so_and_never_advises_deleting(tmp_path):
    from rolebound.store import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite")

    class Full:         # what sqlite raises at the write call on a full disk
        def execute(self, *a):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise exc

        def close(self):
            pass

    real, cache._conn = cache._conn, Full()
    try:
        with pytest.raises(Exception) as info:
            cache.put("k", {"text": "B"})
        msg = str(info.value)
        assert "the disk is full (ENOSPC)" in msg and "delete" not in msg
    finally:
        real.close()


@pytest.mark.slow
@needs_script
def test_a_full_disk_on_a_real_mount_stops_the_run_saying_so(tmp_path):
    """A 200 KB tmpfs as the cache folder (root only; skipped where mounting is refused)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        big = tmp_path / "q.jsonl"
        big.write_text("".join(json.dumps({"id": f"q{i}", "question": "Q? " + "x" * 3000, "options": ["a", "b"],
                                           "answer": "A"}) + "\n" for i in range(60)))
        env = {**os.environ, "ROLEBOUND_CACHE_DIR": str(mnt / "cache")}
        res = rolebound("run", "mcq", "--model", "fake:random", "--data", big, "--out", tmp_path / "r", "--quiet",
                        env=env)
        err = one_line(res, 2)
        assert "the disk is full (ENOSPC)" in err and "delete" not in err
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.slow
@needs_script
def test_a_cache_dir_that_is_a_file_says_it_is_not_a_folder(tmp_path, data):
    f = tmp_path / "hostname"
    f.write_text("x")
    env = {**os.environ, "ROLEBOUND_CACHE_DIR": str(f)}
    err = one_line(rolebound("run", "mcq", "--model", "fake:random", "--data", data, "--out", tmp_path / "r",
                             env=env), 2)
    assert f"{f}, ROLEBOUND_CACHE_DIR: is not a folder" in err and "File exists" not in err


def test_a_retry_after_that_is_no_wait_reads_as_absent():
    from types import SimpleNamespace

    from rolebound.models.openai_api import _retry_after

    def ra(**headers):
        return _retry_after(SimpleNamespace(response=SimpleNamespace(headers=headers)))

    assert [ra(**{"retry-after": v}) for v in ("-5", "NaN", "inf", "nonsense")] == [None] * 4
    assert ra(**{"retry-after-ms": "NaN", "retry-after": "3"}) == 3.0 and ra(**{"retry-after": "2"}) == 2.0
    assert ra(**{"retry-after-ms": "1e308"}) == 1e305


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("header, says", [
    ({"headers": {"retry-after-ms": "1e308"}}, "asks to wait over 1,000 years (Retry-After)"),
    ({"retry_after": "NaN"}, "failed for"),
])
def test_absurd_retry_after_values(tmp_path, data, header, says):
    """1e308 ms is a wait past the run's limit, said in words; -5 and NaN are no wait at all: such a
    429 counts towards the endpoint being down, so the run stops (here after down_after=2 s)."""
    with FakeServer() as srv:
        srv.fail(status=429, message="slow down", **header)
        res = rolebound("run", "mcq", "--model", "openai:m", "--base-url", srv.url + "/v1", "--data", data,
                        "--out", tmp_path / "r", "--quiet", "--timeout", "2", "--backend-opt", "down_after=2",
                        timeout=60)
    err = one_line(res, 3)
    assert says in err and len(err) < 600, err


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("flag", ["--set", "--model"])
def test_a_120_kb_option_value_is_cut_in_the_error_line(tmp_path, flag):
    value = "y" * 120_000
    err = one_line(rolebound("run", "charm", flag, value, "--limit", "1", "--out", tmp_path / "r"), 2)
    assert len(err) < 1000 and "(120000 characters)" in err, err[:300]


def test_card_compare_refuses_a_card_json_with_a_figure_out_of_its_domain(tmp_path):
    from rolebound.card.render import read_card
    from rolebound.errors import InputError

    fig = {"key": "ba", "label": "BA accuracy", "unit": "%", "value": 40.0, "lo": 30.0, "hi": 50.0, "n": 12}
    card = {"card": 1, "model": "fake:random", "suites": [{"suite": "charm", "protocol": "demo", "figures": [fig]}]}
    (tmp_path / "card.json").write_text(json.dumps(card))
    assert read_card(tmp_path)["model"] == "fake:random"
    for bad, says in (({"value": 1e308}, "value 1e+308 is outside [0, 100]"), ({"n": -5}, "n is -5"),
                      ({"value": None, "lo": float("nan")}, "finite number")):
        card["suites"][0]["figures"] = [{**fig, **bad}]
        (tmp_path / "card.json").write_text(json.dumps(card))
        with pytest.raises(InputError, match=r"card\.json, field 'suites\[0\]\.figures\[0\]") as info:
            read_card(tmp_path)
        assert says in str(info.value), str(info.value)
