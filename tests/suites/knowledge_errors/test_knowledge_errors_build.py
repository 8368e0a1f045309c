"""knowledge-errors construction pipeline (Tables 8-13): parsers, drop counting and a scripted run.
The same steps against the real bundled model are in test_knowledge_errors_model.py."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from rolebound.suites.knowledge_errors import build as B
from rolebound.models.base import CHAT, Backend, GenResult
from rolebound.records import Decoding
from rolebound.runner import Session
from rolebound.store import RunDir, load_records
from rolebound.suites.knowledge_errors.data import KECorpus, load_items, load_topics


def test_parse_memories_keeps_valid_lines_and_counts_the_rest():
    reply = ("[Event Memory] I met Charles Babbage in June 1833.\n\n"
             "**[Relational Memory]** I found a mentor in Mary Somerville.\n\n"
             "1. [Attitudinal Memory] I believe the Engine could compose music.\n\n"
             "[Dream Memory] I flew over London.\n\n"
             "[Identity Memory] She was a countess.\n\n"
             "[Event Memory] " + "I " + "very " * 30 + "long.\n\n"
             "[Event Memory] I met Charles Babbage in June 1833.\n\n"
             "[Identity Memory]\n\n"
             "Some chatter without a category.")
    kept, drops = B.parse_memories(reply)
    assert kept == [("event", "I met Charles Babbage in June 1833."),
                    ("relational", "I found a mentor in Mary Somerville."),
                    ("attitudinal", "I believe the Engine could compose music.")]
    assert drops == {"bad_category": 1, "not_first_person": 1, "too_long": 1, "duplicate": 1,
                     "empty_memory": 1, "not_a_memory_line": 1}
    assert B.parse_memories("")[1] == {"empty_reply": 1}


def test_parse_manipulation():
    ok = "[explanation] I changed the city.\n\n[manipulate] I was born in Edinburgh."
    assert B.parse_manipulation(ok) == ("I changed the city.", "I was born in Edinburgh.")
    assert B.parse_manipulation("**[Explanation]:** why\n\n**[Manipulate]:** \"I did X.\"") == ("why", "I did X.")
    assert B.parse_manipulation("I was born in Edinburgh.") == "format"
    two = ok + "\n\n[manipulate] I was born in Paris."
    assert B.parse_manipulation(two) == "multiple_errors"
    assert B.parse_manipulation("[explanation] e\n\n[manipulate] She was born in Paris.") == "not_first_person"


def test_changed_spans_counts_separate_edits():
    a = "I met the mathematician Charles Babbage in London in June 1833."
    assert B.changed_spans(a, a.replace("London", "Cambridge")) == 1
    assert B.changed_spans(a, a.replace("London", "Cambridge").replace("June", "May")) == 2
    assert B.changed_spans(a, "I met Faraday in Paris in May 1840 at a ball.") > 2


@pytest.mark.parametrize("reply,want", [
    ("Were you born in Edinburgh?", "Were you born in Edinburgh?"),
    ("Question: \"Did you meet Babbage in 1833?\"\nThat is my rewrite.", "Did you meet Babbage in 1833?"),
    ("**Do you love music?**", "Do you love music?"),
    ("You were born in Edinburgh.", None),
    ("Why were you born in Edinburgh?", None),
    ("", None),
])
def test_parse_question(reply, want):
    assert B.parse_question(reply) == want


class Scripted(Backend):
    """Answers each construction prompt the way a compliant model would; the second memory's
    KKE edit changes three places, so its pair must be dropped as carrying more than one error."""

    backend = "scripted"
    capabilities = frozenset({CHAT})

    async def generate(self, requests, decoding):
        out = []
        for r in requests:
            p = r.messages[-1].content
            if "Memory Description:" in p:
                text = ("[Event Memory] I met Charles Babbage in London in June 1833.\n\n"
                        "[Relational Memory] I found a mentor in Mary Somerville.\n\n"
                        "[Event Memory] She translated an article.")
            elif "could possibly know" in p:          # Table 9 (KKE)
                mem = re.search(r"\*\* Correct Memory: (.*)\n", p).group(1)
                if "Babbage" in mem:
                    text = f"[explanation] I moved the meeting.\n\n[manipulate] {mem.replace('London', 'Cambridge')}"
                else:
                    text = "[explanation] Many edits.\n\n[manipulate] I once found a rival in Caroline Herschel."
            elif "completely unknown" in p:            # Table 11 (UKE)
                mem = re.search(r"\*\* Correct Memory: (.*)\n", p).group(1)
                text = f"[explanation] I added a phone.\n\n[manipulate] {mem[:-1]}, using my smartphone."
            elif "second-person general question" in p:   # Table 13
                mem = re.search(r"\*\* Manipulate Memory: (.*)\n", p).group(1)
                text = "Did you " + mem[2:].replace("my ", "your ").replace("met", "meet").rstrip(".") + "?"
            else:
                text = "?"
            out.append(GenResult(text=text, prompt_tokens=len(p.split()), completion_tokens=len(text.split())))
        return out


def _session(tmp_path, backend):
    rd = RunDir(tmp_path / "b.build")
    rd.open_for_append()
    return rd, Session(rd, "knowledge-errors", backend, Decoding(), cache=None, use_cache=False)


def test_build_pipeline_with_a_scripted_model(tmp_path):
    corpus = [KECorpus(character="Ada Lovelace", note="test",
                       text="Ada met Babbage in London in June 1833. Mary Somerville was her mentor.")]
    rd, session = _session(tmp_path, Scripted("s"))
    res = asyncio.run(B.build(session, corpus, load_topics(), B.BuildOptions(source="test")))
    rd.close()
    assert res.counts["chunks"] == 1 and res.counts["memories_parsed"] == 2
    assert res.counts["pairs_kept"] == 1 and res.counts["pairs_dropped"] == 1
    assert res.drops == {"memory_not_first_person": 1, "kke_multiple_errors": 1}
    kke, uke = res.items
    assert (kke.error_type, uke.error_type) == ("KKE", "UKE") and kke.memory_id == uke.memory_id
    assert kke.query == "Did you meet Charles Babbage in Cambridge in June 1833?"
    assert uke.query.startswith("Did you meet Charles Babbage in London") and len(uke.topics) == 2
    assert kke.correct_query == "Did you meet Charles Babbage in London in June 1833?"
    assert kke.explanation == "I moved the meeting." and kke.validated is False
    recs = load_records(tmp_path / "b.build")
    # one record per call: memories, 2 x (kke, uke), 3 questions for the kept memory
    assert sorted(r.stage for r in recs) == sorted(["memories", "kke.0", "uke.0", "kke.1", "uke.1",
                                                     "question.kke.0", "question.uke.0", "question.correct.0"])
    assert all(r.role == "generator" for r in recs)


def test_run_build_writes_a_loadable_dataset_and_resumes(tmp_path, monkeypatch):
    from rolebound import models

    corpus_file = tmp_path / "c.corpus.yaml"
    corpus_file.write_text("- character: Ada Lovelace\n  note: test\n  text: |\n"
                           "    Ada met Babbage in London in June 1833.\n", encoding="utf-8")
    monkeypatch.setattr(models, "create_backend", lambda spec, decoding=None, **kw: Scripted("s"))
    out = tmp_path / "built.jsonl"
    res, paths = B.run_build(str(corpus_file), str(out), model="scripted", use_cache=False)
    assert res.counts["items"] == 2
    items = load_items(out)
    assert len(items) == 2 and (tmp_path / "built.corpus.yaml").exists()
    info = json.loads((tmp_path / "built.build" / "build.json").read_text())
    assert info["counts"]["pairs_kept"] == 1
    res2, _ = B.run_build(str(corpus_file), str(out), model="scripted", use_cache=False)
    assert res2.counts["model_calls"] == 0 and res2.counts["resumed"] > 0     # resumed from its records
    from rolebound.errors import RoleboundError

    with pytest.raises(RoleboundError):
        B.run_build(str(corpus_file), str(out), model="scripted", use_cache=False,
                    opts=B.BuildOptions(max_kke_spans=5))
    # the built file runs as --data, with its corpus found beside it
    from rolebound.suites import get_suite

    ke = get_suite("knowledge-errors")
    ds = ke.load(str(out), ke.run_settings(["rag"]))
    assert ds.extra["corpus_from_items"] == [] and len(ds.items) == 2


def test_build_command_is_registered(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rolebound import models
    from rolebound.cli import app

    corpus_file = tmp_path / "c.corpus.yaml"
    corpus_file.write_text("- character: Ada Lovelace\n  note: test\n  text: |\n"
                           "    Ada met Babbage in London in June 1833.\n", encoding="utf-8")
    monkeypatch.setattr(models, "create_backend", lambda spec, decoding=None, **kw: Scripted("s"))
    out = tmp_path / "cli.jsonl"
    res = CliRunner().invoke(app, ["build", "knowledge-errors", str(corpus_file), "--out", str(out), "--no-cache"])
    assert res.exit_code == 0, res.output
    assert "pairs_kept" in res.output and "dropped: memory_not_first_person" in res.output
    assert len(load_items(out)) == 2
