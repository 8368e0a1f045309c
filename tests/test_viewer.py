"""The sample viewer's data, report.md escaping, the end-of-run summary and `rolebound view`."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rolebound import api
from rolebound.records import Record
from rolebound.report.builder import Report, md_escape, md_text, payload, question_text
from rolebound.store import RunDir

from helpers import raw_tags, rendered_markdown, write_mcq

EVIL = '</script><script>alert("x")</script><!-- <img src=x onerror=alert(1)> [a](javascript:alert(1)) *b* |c'
BIN = Path(sys.executable).parent / "rolebound"


def _evil_run(tmp_path) -> Path:
    """A real mcq run whose model name, item text and reply all carry markup."""
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "e1", "question": EVIL, "options": [EVIL, "b"], "answer": "A"}) + "\n")
    out = tmp_path / "run"
    api.run("mcq", model="fake:echo", data=str(p), out=out, scoring="generate", progress=False)
    rd = RunDir(out)
    m = rd.read_manifest()
    m.model = "openai:x" + EVIL
    rd.write_manifest(m)
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    for r in lines:
        r["model"], r["response"] = m.model, "reply " + EVIL
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    api.build_report(out)
    return out


def test_report_md_escapes_run_data(tmp_path):
    md = (_evil_run(tmp_path) / "report.md").read_text()
    assert raw_tags(md) == []                        # no raw tag of any kind reaches a renderer
    assert "&lt;" not in md and "&amp;" not in md    # markdown's escapes, not entities shown as text
    assert "openai:x\\</script>\\<script>alert(\"x\")" in md
    assert "\\[a\\](javascript:alert(1))" in md and "\\*b\\*" in md and "\\|c" in md
    assert EVIL in html_lib.unescape(re.sub(r"<[^>]+>", "", rendered_markdown(md)))   # shown as itself


def test_md_escape_rules():
    assert md_escape("a|b\nc") == "a\\|b c"
    assert md_escape("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)>"
    assert md_escape("# BA+ & FC-BC") == "# BA+ & FC-BC" and md_text("p < 0.05, a < b") == "p < 0.05, a < b"
    assert md_text("&amp; &#60; <!-- x --> <https://x.y>") == "\\&amp; \\&#60; \\<!-- x --> \\<https://x.y>"
    assert md_text("> quoted") == "\\> quoted"
    assert md_text("# title\n- item\n3. x\nplain 3. y") == "\\# title\n\\- item\n3\\. x\nplain 3. y"
    assert md_escape("x_y [z]") == "x\\_y \\[z\\]"
    # a code span stays one (its text is literal in every renderer); backticks outside one are escaped
    assert md_text("the format `Answer: <n>` or <b>") == "the format `Answer: <n>` or \\<b>"
    assert md_escape("`a|b` c`d") == "`a\\|b` c\\`d"
    assert md_text("``x`<img>``") == "``x`<img>``"


def _embedded(html: str, sid: str) -> dict:
    m = re.search(rf'<script type="application/json" id="{sid}-data">(.*?)</script>', html, re.S)
    assert m, "no embedded sample data"
    return m.group(1)


def test_html_payload_is_inert_and_exact(tmp_path):
    out = _evil_run(tmp_path)
    html = (out / "report.html").read_text()
    sid = re.search(r'data-viewer="([^"]+)"', html).group(1)
    raw = _embedded(html, sid)
    assert "<" not in raw and ">" not in raw and "&" not in raw     # cannot close the block or open a comment
    data = json.loads(raw)
    strings = data["strings"]
    assert "reply " + EVIL in strings                               # the reply survives byte for byte
    assert any(EVIL in s for s in strings)                          # and the item text in the prompt
    assert data["records"][0]["model"] == "openai:x" + EVIL
    assert html.count("<script") == 2                               # the data block and the viewer, nothing injected
    assert "<img" not in html and "<!--" not in html
    assert "openai:x&lt;/script&gt;" in html                        # the facts table, escaped by jinja


def _rec(call_id, item, stage, role="model", **kw) -> Record:
    return Record(call_id=call_id, item_id=item, suite="charm", strategy="independent", stage=stage, role=role,
                  **kw)


def test_rows_join_records_and_show_the_users_question():
    bc = _rec("bc/1/independent/bc", "bc/1", "bc", kind="score",
              prompt=[{"role": "user", "content": "You are X. Profile...\nQuestion: Which film?\nChoices:\n1. A"},
                      {"role": "assistant", "content": "Answer: "}],
              continuations=["1", "2"], logprobs=[-0.1, float("-inf")], response="1", parsed=1, gold=2,
              correct=False, meta={"region": "China", "reading": "first option token"})
    judge = _rec("bc/1/independent/judge", "bc/1", "judge", role="judge", parsed="yes", response="judgment: yes")
    other = _rec("bc/2/independent/bc", "bc/2", "bc", prompt="raw Question: Who?\nmore", response="2", parsed=2,
                 gold=2, correct=True)
    rows = [{"_call": bc.call_id, "question": "Answer: ", "stage": "bc", "response": "1"},
            {"_call": other.call_id, "question": "?", "stage": "bc", "response": "2"},
            {"question": "no record", "stage": "bc", "response": "3"}]
    d = payload(["question", "stage", "response"], rows, ["stage"], [bc, judge, other])
    assert [r["question"] for r in d["rows"]] == ["Which film?", "Who?", "no record"]
    assert d["columns"] == ["question", "stage", "parsed", "gold", "outcome", "reading", "response"]
    assert d["rows"][0]["outcome"] == "wrong" and d["rows"][1]["outcome"] == "correct"
    assert d["rows"][0]["reading"] == "first option token" and "outcome" in d["filters"]
    assert d["rows"][0]["_r"] == 0 and "_r" not in d["rows"][2]
    assert [r["id"] for r in d["records"]] == [bc.call_id, judge.call_id, other.call_id]
    assert d["records"][0]["options"] == ["1", "2"]
    s = d["strings"]
    assert s[d["records"][0]["prompt"][0][1]].endswith("1. A") and s[d["records"][1]["response"]] == "judgment: yes"
    from rolebound.report.builder import script_json

    assert json.loads(script_json(d))["records"][0]["logprobs"] == [-0.1, None]    # -inf: JSON has no such number


def test_question_text_prefers_the_item_query():
    r = _rec("a", "a", "answer", prompt=[{"role": "user", "content": "act like Ada. Are you Byron's child?"}],
             meta={"query": "Are you Byron's child?"})
    assert question_text(r) == "Are you Byron's child?"
    r2 = _rec("b", "b", "answer", prompt=[{"role": "user", "content": "Role... <question> Who is MJ?\nA) x <question/>"},
                                          {"role": "assistant", "content": "Answer:"}])
    assert question_text(r2) == "Who is MJ?"


def test_reports_without_records_still_list_rows(tmp_path):
    rep = Report("t")
    rep.samples("rows", ["a"], [{"a": "x"}], ["a"])
    rep.write(tmp_path)
    html = (tmp_path / "report.html").read_text()
    data = json.loads(_embedded(html, re.search(r'data-viewer="([^"]+)"', html).group(1)))
    assert data["rows"] == [{"a": "x"}] and data["records"] == []


# -- the CLI --------------------------------------------------------------------------------------

def _cli(*args, cwd=None, env=None, timeout=120):
    e = dict(os.environ, COLUMNS="40", **(env or {}))
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, env=e, timeout=timeout)


@pytest.mark.slow
def test_summary_prints_whole_paths_once(tmp_path):
    out = tmp_path / ("a-run-folder-with-a-name-much-longer-than-eighty-columns-" + "x" * 40)
    data = write_mcq(tmp_path / "q.jsonl", 3)
    p = _cli("run", "mcq", "--model", "fake:random", "--data", str(data), "-o", str(out), "-q")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines.count(f"run folder: {out}") == 1
    assert lines.count(f"rebuild the report: rolebound report {out}") == 1
    assert lines.count(f"report: {out / 'report.md'}") == 1
    assert lines[-1] == f"report: {out / 'report.html'}"          # ends with the report path, whole
    assert sum(str(out) in x for x in lines) == 4


@pytest.mark.slow
def test_view_a_run_prints_its_report(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 3)
    run = tmp_path / "runs" / "one"
    api.run("mcq", model="fake:random", data=str(data), out=run, progress=False)
    (run / "report.html").unlink()                                  # rebuilt from records.jsonl
    p = _cli("view", str(run), "--no-open")
    assert p.returncode == 0, p.stderr
    assert f"report: {run / 'report.html'}" in p.stdout and (run / "report.html").exists()
    assert (run / "report.html").resolve().as_uri() in p.stdout
    bad = _cli("view", str(tmp_path / "nothing-here"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no such folder" in bad.stderr
    (tmp_path / "empty").mkdir()
    bad = _cli("view", str(tmp_path / "empty"), "--no-open")
    assert bad.returncode == 2 and "neither a run folder" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_view_serves_an_index_of_runs_newest_first(tmp_path):
    root = tmp_path / "runs"
    for name in ("older", "newer"):
        api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=2, out=root / name,
                progress=False)
    rd = RunDir(root / "newer")
    m = rd.read_manifest()
    m.model, m.finished = "openai:" + EVIL, "2999-01-01T00:00:00+00:00"
    rd.write_manifest(m)
    (root / "notes").mkdir()                                         # not a run: ignored
    proc = subprocess.Popen([str(BIN), "view", str(root), "--port", "0", "--no-open"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        assert "2 run(s)" in line
        for _ in range(50):
            try:
                page = urllib.request.urlopen(url, timeout=10).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert "<script" not in page and "<img" not in page
        assert "openai:&lt;/script&gt;&lt;script&gt;" in page
        assert page.index("newer/report.html") < page.index("older/report.html")
        assert page.count("<td>knowledge-errors</td>") == 2 and page.count("<td>vanilla</td>") == 2
        assert "KKE" in page                                       # a headline figure from the suite summary
        rep = urllib.request.urlopen(url + "older/report.html", timeout=10).read().decode()
        assert "data-viewer" in rep
    finally:
        proc.terminate()
        proc.wait(10)


def _get(port: int, path: str, host: str | None = "127.0.0.1") -> tuple[int, bytes]:
    """A raw GET: the path as written (no client-side normalising) and the Host header chosen."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", f"{host}:{port}" if ":" not in host else host)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


@pytest.mark.slow
def test_view_serves_only_regular_files_under_its_root_to_a_local_host(tmp_path):
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    data = write_mcq(tmp_path / "q.jsonl", 2)
    for run in (root / "one", elsewhere / "two"):
        api.run("mcq", model="fake:echo", data=str(data), out=run, progress=False)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    (root / "etc").symlink_to("/etc")                        # a folder link out of the root
    (root / "one" / "leak.txt").symlink_to(secret)          # a file link out of the root
    (root / "two").symlink_to(elsewhere / "two")            # a run linked in from outside
    (root / "inside.html").symlink_to(root / "one" / "report.html")     # a link that stays inside: fine
    (root / "sweep").mkdir()
    (root / "sweep" / "index.html").write_text("a sweep's index")           # a folder's index.html is served
    proc = subprocess.Popen([str(BIN), "view", str(root), "--port", "0", "--no-open"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", line).group(1))
        assert "1 run(s)" in line                              # the linked-in run is not the root's
        status, page = _get(port, "/")
        assert status == 200 and b"one/report.html" in page and b"two/report.html" not in page
        assert _get(port, "/one/report.html")[0] == 200 and _get(port, "/inside.html")[0] == 200
        assert _get(port, "/one/report.html", host="localhost")[0] == 200
        assert _get(port, "/sweep")[0] == 301 and _get(port, "/sweep/") == (200, b"a sweep's index")
        for path in ("/etc/passwd", "/one/leak.txt", "/two/report.html", "/two/records.jsonl", "/one/",
                     "/one", "/etc", "/one/nothing.txt"):
            status, body = _get(port, path)
            assert status == 404, path
            assert b"root:" not in body and b"TOP SECRET" not in body and b"data-viewer" not in body
        for path in ("/one/%00", "/%00", "/one/%ff.html", "/one/../one/report.html", "/%2e%2e/secret.txt",
                     "/one/%2E%2E/%2e%2e/secret.txt"):
            assert _get(port, path)[0] == 400, path
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1", "localhost.evil.example", None):
            status, body = _get(port, "/one/report.html", host=host)
            assert status == 421 and b"data-viewer" not in body, host
        assert _get(port, "/")[0] == 200                       # still serving after all that
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err and "Error" not in err, err
