"""Reports escape everything they show and need no network."""

from __future__ import annotations

import json

from rolebound import api

from helpers import write_mcq


def test_html_escapes_model_text_and_data(tmp_path):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "e1", "question": evil, "options": [evil, "b"], "answer": "A"}) + "\n")
    res = api.run("mcq", model="fake:echo", data=str(p), out=tmp_path / "run", scoring="generate", progress=False)
    html = (tmp_path / "run" / "report.html").read_text()
    assert "<script>alert(" not in html and "<img src=x" not in html
    assert "\\u003c/script\\u003e" in html           # inert inside the embedded JSON
    assert "http://" not in html and "https://" not in html   # self-contained
    assert res.report_paths[0].name == "report.md"


def test_report_rebuilds_from_records_alone(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 9)
    res = api.run("mcq", model="fake:random", data=str(data), out=tmp_path / "run", progress=False)
    before = json.loads((tmp_path / "run" / "metrics.json").read_text())
    (tmp_path / "run" / "metrics.json").unlink()
    (tmp_path / "run" / "report.html").unlink()
    metrics, paths = api.build_report(tmp_path / "run")
    assert metrics == before and all(p.exists() for p in paths)
    df = api.load_run(tmp_path / "run")
    assert len(df) == 9 and {"item_id", "parsed", "correct", "latency_s"} <= set(df.columns)
    assert res.metrics == before
