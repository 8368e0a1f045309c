"""`rolebound data pairs`: preference pairs from runs' records, split by whole characters."""

from __future__ import annotations

import json

import pytest

from rolebound import api, pairs
from rolebound.errors import InputError
from rolebound.store import load_records

from helpers import needs_script, rolebound

SUITES = {"charm": 40, "capability": 12, "knowledge-errors": 12, "multiverse": 12}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("pair-runs")
    out = {}
    for suite, limit in SUITES.items():
        out[suite] = api.run(suite, model="fake:random", limit=limit, out=base / suite, progress=False).run_dir
    # a generated charm run too: its pairs are whole replies, not scored continuations
    out["charm-generate"] = api.run("charm", model="fake:random", limit=40, scoring="generate",
                                    out=base / "charm-generate", progress=False).run_dir
    return out


def _by_call(run_dir):
    return {r.call_id: r for r in load_records(run_dir)}


@pytest.mark.parametrize("suite", list(SUITES) + ["charm-generate"])
def test_each_suite_makes_pairs_that_follow_its_records(runs, suite):
    rows, meta_runs, skipped = pairs.build([runs[suite]])
    assert rows, skipped
    recs = _by_call(runs[suite])
    for row in rows:
        rec = recs[row["call_id"]]
        assert row["prompt"] and row["prompt"][-1]["role"] != "assistant"
        assert [m["role"] for m in row["chosen"]] == ["assistant"] == [m["role"] for m in row["rejected"]]
        assert row["chosen"][0]["content"] != row["rejected"][0]["content"]
        assert row["character"] and row["run"] == runs[suite].name and row["model"] == "fake:random"
        prefill = rec.prompt[-1]["content"] if rec.prompt[-1]["role"] == "assistant" else ""
        if rec.kind == "score":
            # the scored continuation after the prefill, on both sides
            assert row["chosen"][0]["content"].startswith(prefill) and row["rejected"][0]["content"].startswith(prefill)
        if row["rule"] in ("charm.bc_abstain", "capability.above_abstain", "knowledge_errors.correction",
                           "multiverse.canon"):
            # the model's own answer is what the pair rejects
            assert row["rejected"][0]["content"] == prefill + (rec.response or "")
    assert meta_runs[0]["pairs"] == len(rows)


def test_charm_pairs_abstain_on_failures_and_answer_kv(runs):
    rows, _, _ = pairs.build([runs["charm"]])
    recs = _by_call(runs["charm"])
    failures = [r for r in recs.values() if r.stage == "bc" and isinstance(r.parsed, int) and r.parsed != r.gold]
    bc = [x for x in rows if x["rule"] == "charm.bc_abstain"]
    assert sorted(x["call_id"] for x in bc) == sorted(r.call_id for r in failures)
    for x in bc:
        assert x["chosen"][0]["content"] == f"Answer: {recs[x['call_id']].gold}"      # logprob: the abstention digit
    kv = [x for x in rows if x["rule"] == "charm.kv_answer"]
    assert kv and all(x["chosen"][0]["content"] == f"Answer: {recs[x['call_id']].gold}" for x in kv)
    yes = [x for x in rows if x["rule"] == "charm.ba_yes"]                         # the BA Yes control
    assert yes and all((x["chosen"][0]["content"], x["rejected"][0]["content"]) == ("Yes", "No") for x in yes)
    assert {x["stratum"].split("/")[1] for x in rows} == {"role", "target"}        # region / kind of persona
    gen, _, _ = pairs.build([runs["charm-generate"]])
    for x in gen:
        if x["rule"] == "charm.bc_abstain":
            text = x["chosen"][0]["content"]
            assert "cannot answer" in text and text.endswith(f"Answer: {_by_call(runs['charm-generate'])[x['call_id']].gold}")


def test_no_character_in_both_splits_and_the_split_is_seeded(runs, tmp_path):
    meta = pairs.write(tmp_path / "p", *pairs.build([runs["charm"], runs["capability"]]), heldout=0.3, seed=3)
    train = [json.loads(x) for x in (tmp_path / "p" / "train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (tmp_path / "p" / "test.jsonl").read_text().splitlines()]
    assert train and test
    assert not {x["character"] for x in train} & {x["character"] for x in test}
    assert set(meta["characters"]["test"]) == {x["character"] for x in test}
    # every stratum with two or more characters keeps at least one for training, and holds one out
    chars: dict[str, dict[str, set]] = {}
    for x in train + test:
        chars.setdefault(x["stratum"], {}).setdefault(x["split"], set()).add(x["character"])
    for st, by_split in chars.items():
        if sum(len(v) for v in by_split.values()) >= 2:
            assert by_split.get("train") and by_split.get("test"), st
    again = pairs.write(tmp_path / "q", *pairs.build([runs["charm"], runs["capability"]]), heldout=0.3, seed=3)
    assert again["characters"] == meta["characters"] and again["hash"] == meta["hash"]
    other = pairs.write(tmp_path / "r", *pairs.build([runs["charm"], runs["capability"]]), heldout=0.3, seed=4)
    assert other["characters"] != meta["characters"]
    card = (tmp_path / "p" / "README.md").read_text()
    from rolebound.report.builder import md_escape

    assert "seed 3" in card and md_escape(", ".join(meta["characters"]["test"])) in card


def test_heldout_is_checked():
    with pytest.raises(InputError, match="--heldout"):
        pairs.heldout_characters([], 1.0, 0)


def test_datasets_reads_the_pairs(runs, tmp_path):
    datasets = pytest.importorskip("datasets")
    meta = pairs.write(tmp_path / "p", *pairs.build([runs[s] for s in SUITES]), heldout=0.3, seed=0)
    # a cache of its own: datasets' cache can hand back an earlier folder's rows at the same path
    ds = datasets.load_dataset(str(tmp_path / "p"), cache_dir=str(tmp_path / "hf-cache"))
    assert set(ds) == {"train", "test"}
    assert len(ds["train"]) == meta["counts"]["train"] and len(ds["test"]) == meta["counts"]["test"]
    assert {x["suite"] for x in ds["train"]} | {x["suite"] for x in ds["test"]} == set(SUITES)
    for row in ds["train"]:
        assert row["prompt"][-1]["role"] == "user" and row["chosen"][0]["role"] == "assistant"


@needs_script
@pytest.mark.slow
def test_cli_writes_pairs_and_guards_its_output(runs, tmp_path):
    out = tmp_path / "pairs"
    r = rolebound("data", "pairs", runs["multiverse"], "--out", out)
    assert r.returncode == 0, r.stderr
    assert "pairs (train" in r.stdout and (out / "pairs.json").exists()
    again = rolebound("data", "pairs", runs["multiverse"], "--out", out)       # its own folder: rewritten
    assert again.returncode == 0, again.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    r = rolebound("data", "pairs", runs["multiverse"], "--out", mine)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    bad = rolebound("data", "pairs", runs["multiverse"], "--out", tmp_path / "x", "--heldout", "1.5")
    assert bad.returncode == 2 and "--heldout" in bad.stderr and "Traceback" not in bad.stderr
