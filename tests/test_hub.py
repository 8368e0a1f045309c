"""`rolebound data export` (a Hugging Face dataset folder) and `--data hf:DIR` reading it back."""

from __future__ import annotations

import json

import pytest
import yaml

from rolebound import api
from rolebound.store import load_records
from rolebound.suites import get_suite

from helpers import needs_script, rolebound

pytest.importorskip("pyarrow", reason="the [hf] extra (pyarrow, datasets) is not installed")
datasets = pytest.importorskip("datasets", reason="the [hf] extra (datasets) is not installed")

SUITES = ["charm", "knowledge-errors", "multiverse", "capability"]


def built(name: str):
    s = get_suite(name)
    settings = s.run_settings(list(s.default_strategies))
    return s, s.load(None, settings)


def export(name: str, out, **kw):
    from rolebound import hub

    s, ds = built(name)
    return hub.export(s, ds, out, data=None, **kw), ds


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITES)
def test_export_loads_with_datasets_and_runs_back_the_same_items(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "export"
    meta, ds = export(name, out)
    s = get_suite(name)
    # every config loads by name, no loading script, with the items of that config in order
    for config, n in meta["configs"].items():
        rows = datasets.load_dataset(str(out), config, split="test")
        want = [i for i in ds.items if s.hub.configs.get(str(getattr(i, s.hub.config_field)),
                                                         str(getattr(i, s.hub.config_field))) == config]
        assert rows["id"] == [i.id for i in want] and len(rows) == n
    # the run on the export asks what the run on the built data asks, item for item and prompt for prompt
    opts = {"similarity": "false"} if name == "charm" else {}      # no embedder to load
    native = api.run(name, model="fake:random", limit=4, out=tmp_path / "native", progress=False, options=opts)
    back = api.run(name, model="fake:random", limit=4, data=f"hf:{out}", out=tmp_path / "back", progress=False,
                   options=opts)
    assert back.manifest.dataset == f"hf:{out}" and back.manifest.dataset_hash == native.manifest.dataset_hash
    a, b = (sorted((r.call_id, json.dumps(r.prompt), str(r.gold)) for r in load_records(run.run_dir))
            for run in (native, back))
    assert a and a == b


@pytest.mark.parametrize("name", SUITES)
def test_the_same_items_hash_the_same_and_edited_ones_apart(name, tmp_path):
    """An export read back holds the built data's items: the same dataset hash, so a run on either
    resumes the other's folder. A changed question is other data: another hash."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rolebound import hub

    _, ds = export(name, tmp_path / "x")
    s = get_suite(name)
    back = hub.load(s, f"hf:{tmp_path / 'x'}", s.run_settings(list(s.default_strategies)))
    assert back.hash == ds.hash
    path = sorted((tmp_path / "x").glob("*/*.parquet"))[0]
    rows = pq.read_table(path).to_pylist()
    key = next(k for k in ("question", "query") if k in rows[0])
    rows[0][key] += " (edited)"
    pq.write_table(pa.Table.from_pylist(rows), path)
    edited = hub.load(s, f"hf:{tmp_path / 'x'}", s.run_settings(list(s.default_strategies)))
    assert edited.hash != ds.hash


def test_card_header_is_what_the_hub_reads(tmp_path):
    meta, ds = export("charm", tmp_path / "x")
    text = (tmp_path / "x" / "README.md").read_text(encoding="utf-8")
    head = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in head["configs"]] == ["ba", "bc", "kv"]
    assert head["configs"][1]["data_files"] == [{"split": "test", "path": "bc/test-*.parquet"}]
    for key in ("license", "language", "task_categories", "size_categories", "pretty_name", "source_datasets"):
        assert head[key], key
    assert head["license"] == "unknown" and "local use only" in text and "CHARM" in text
    assert meta["local_only"] and sum(meta["configs"].values()) == len(ds.items)
    tasks = yaml.safe_load((tmp_path / "x" / "eval.yaml").read_text())["tasks"]
    assert tasks[0]["task"] == "rolebound/charm"


def test_multiverse_configs_are_canon_and_dilemmas(tmp_path):
    meta, _ = export("multiverse", tmp_path / "m")
    assert set(meta["configs"]) == {"canon", "dilemmas"}


@needs_script
@pytest.mark.slow
def test_unlicensed_source_refuses_a_licence_claim(tmp_path):
    r = rolebound("data", "export", "multiverse", "--out", tmp_path / "m", "--license", "cc-by-4.0")
    assert r.returncode == 2 and "no licence" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m" / "README.md").exists()
    ok = rolebound("data", "export", "capability", "--out", tmp_path / "c")
    assert ok.returncode == 0, ok.stderr
    head = yaml.safe_load((tmp_path / "c" / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    assert head["license"] == "apache-2.0"


def test_an_edited_row_is_named_by_file_and_row(tmp_path):
    import pyarrow.parquet as pq

    from rolebound import hub
    from rolebound.errors import InputError

    export("capability", tmp_path / "c")
    path = next((tmp_path / "c" / "elementary").glob("*.parquet"))
    rows = pq.read_table(path).to_pylist()
    rows[1]["level"] = None
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), path)
    s = get_suite("capability")
    with pytest.raises(InputError) as e:
        hub.load(s, f"hf:{tmp_path / 'c'}", s.run_settings(["identity"]))
    assert str(path) in str(e.value) and "row 2" in str(e.value)


def test_not_an_export(tmp_path):
    from rolebound import hub
    from rolebound.errors import InputError

    s = get_suite("charm")
    with pytest.raises(InputError, match="no rolebound.json"):
        hub.load(s, f"hf:{tmp_path}", s.run_settings(["independent"]))
    (tmp_path / "rolebound.json").write_text(json.dumps({"suite": "multiverse"}))
    with pytest.raises(InputError, match="multiverse"):
        hub.load(s, f"hf:{tmp_path}", s.run_settings(["independent"]))


def test_other_data_states_no_licence_unless_told_and_travels_with_the_export(tmp_path):
    from rolebound import hub
    from rolebound.suites.capability.data import BANK_FILE

    s, ds = built("capability")
    meta = hub.export(s, ds, tmp_path / "a", data=str(BANK_FILE))
    assert meta["local_only"] and meta["sources"] == [f"source/{BANK_FILE.name}"]
    assert (tmp_path / "a" / "source" / BANK_FILE.name).read_bytes() == BANK_FILE.read_bytes()
    assert not hub.export(s, ds, tmp_path / "b", data=str(BANK_FILE), license_id="cc-by-4.0")["local_only"]
    back = hub.load(s, f"hf:{tmp_path / 'a'}", s.run_settings(["identity"]))
    assert [i.id for i in back.items] == [i.id for i in ds.items]
