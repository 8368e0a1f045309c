"""`rolebound tune` (DPO + LoRA with TRL and PEFT) and `--backend-opt adapter=DIR`, through the
installed script, on a tiny random model that carries the bundled model's tokenizer: two DPO steps
through TRL's DPOTrainer on the pairs of a charm, a capability, a knowledge-errors and a multiverse
run show that the pairs are what TRL takes."""

from __future__ import annotations

import json

import pytest

from rolebound import api, pairs

from helpers import needs_script, rolebound

pytestmark = [pytest.mark.model, pytest.mark.slow, needs_script]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rolebound.models.bundled import converted_dir

    base = tmp_path_factory.mktemp("tune")
    tok = AutoTokenizer.from_pretrained(converted_dir())
    torch.manual_seed(0)
    tiny = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                        max_position_embeddings=2048))
    tiny.save_pretrained(base / "tiny")
    tok.save_pretrained(base / "tiny")
    # pairs of all four suites in one train split: TRL tokenises every row when the trainer is made
    runs = [api.run(suite, model="fake:random", limit=limit, out=base / suite, progress=False).run_dir
            for suite, limit in (("charm", 40), ("capability", 6), ("knowledge-errors", 12), ("multiverse", 12))]
    meta = pairs.write(base / "pairs", *pairs.build(runs), heldout=0.3, seed=0)
    assert {r.split(".")[0] for r in meta["rules"]} == {"charm", "capability", "knowledge_errors", "multiverse"}
    return base


def _tune(setup, out, *extra):
    return rolebound("tune", setup / "pairs", "--model", f"hf:{setup / 'tiny'}", "--out", out,
                     "--max-steps", "2", "--batch-size", "2", "--max-length", "256", *extra, timeout=600)


def test_tune_writes_an_adapter_that_runs_and_resumes(setup, tmp_path):
    from rolebound.errors import InputError, RoleboundError
    from rolebound.tune import TuneSettings, tune

    out = tmp_path / "adapter"
    r = _tune(setup, out)
    assert r.returncode == 0, r.stderr[-2000:]
    done = json.loads((out / "tune.json").read_text())
    pairs_meta = json.loads((setup / "pairs" / "pairs.json").read_text())
    assert done["status"] == "done" and done["steps"] == 2 and not done["resumed"]
    assert done["pairs_hash"] == pairs_meta["hash"] and done["settings"]["max_steps"] == 2
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    assert "it/s" in r.stderr or "s/it" in r.stderr          # the trainer's bar: rate and ETA
    # other settings into the same folder: refused in one line, nothing changed
    before = (out / "tune.json").read_text()
    other = _tune(setup, out, "--lora-r", "4")
    assert other.returncode == 2 and "holds another tune" in other.stderr and "Traceback" not in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and (out / "tune.json").read_text() == before
    # the same settings resume from the last checkpoint (in-process: the weights are loaded once)
    same = TuneSettings(batch_size=2, max_length=256, max_steps=2, lora_alpha=16)
    assert tune(setup / "pairs", f"hf:{setup / 'tiny'}", out, same)["resumed"] is True
    with pytest.raises(InputError, match="holds another tune"):
        tune(setup / "pairs", f"hf:{setup / 'tiny'}", out, TuneSettings(batch_size=4, max_length=256, max_steps=2))

    # the tuned model runs through the local backend; its replies are never the base model's cached ones
    kw = dict(model=f"hf:{setup / 'tiny'}", limit=5, scoring="logprob", progress=False)
    api.run("charm", out=tmp_path / "base", **kw)
    tuned = api.run("charm", out=tmp_path / "tuned", backend_options={"adapter": str(out)}, **kw)
    m = json.loads((tmp_path / "tuned" / "manifest.json").read_text())
    assert m["adapter"]["sha"] == done["adapter_sha"] and m["counts"]["cache_hits"] == 0
    assert tuned.counts.calls > 0 and "adapter" in (tmp_path / "tuned" / "report.md").read_text()
    # a base run's folder is not resumed by the tuned model
    with pytest.raises(RoleboundError, match="adapter"):
        api.run("charm", out=tmp_path / "base", backend_options={"adapter": str(out)}, **kw)


def test_bad_pairs_and_models_are_one_line(setup, tmp_path):
    r = rolebound("tune", tmp_path, "--out", tmp_path / "a")
    assert r.returncode == 2 and "pairs.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = rolebound("tune", setup / "pairs", "--model", "openai:gpt-4o-mini", "--out", tmp_path / "b")
    assert r.returncode == 2 and "--model" in r.stderr and "Traceback" not in r.stderr
    r = rolebound("run", "charm", "--model", "fake:random", "--backend-opt", f"adapter={tmp_path}", "--limit", "2",
                  "--out", tmp_path / "c")
    assert r.returncode != 0 and "Traceback" not in r.stderr
