"""`rolebound tune`: DPO with a LoRA adapter on preference pairs (`rolebound data pairs`), with
TRL's DPOTrainer and PEFT (the `fix` extra), and the adapter loaded back into the local backends
(`--backend-opt adapter=DIR`, merged into the weights at load).

The adapter folder holds PEFT's adapter files, TRL's checkpoints (the same command resumes from
the last one) and tune.json: the pairs' hash, the base model, every training setting, and the
result. A folder that holds another tune (other pairs, base or settings) is refused.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import BackendError, InputError
from .io import check_file, json_loads, jsonl_lines, write_text_atomic
from .models.adapter import INSTALL_HINT, MARKER, file_sha

CHECKPOINTS = "checkpoints"


@dataclass(frozen=True)
class TuneSettings:
    """What a tune is trained with (all of it in tune.json; a resume must match it)."""

    epochs: float = 1.0
    learning_rate: float = 5e-5
    batch_size: int = 8
    max_length: int = 384
    beta: float = 0.1
    lora_r: int = 8
    lora_alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    seed: int = 0
    max_steps: int = -1          # -1: the epochs decide
    save_steps: int = 5


def _fix_packages():
    try:
        import peft  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        raise BackendError(f"tuning needs trl and peft: {INSTALL_HINT}") from None


def read_json(path: Path) -> Any:
    """A JSON file rolebound wrote, read as user input: one line naming it if it is not JSON."""
    check_file(path)
    try:
        return json_loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not JSON ({exc})", file=str(path)) from None


def base_folder(spec: str) -> Path:
    """The local model folder a spec names: `bundled` (its converted folder) or `hf:PATH`."""
    backend, _, name = spec.partition(":")
    if backend == "bundled":
        from .models.bundled import DEFAULT, MODELS, converted_dir
        from .models.install import PACKS, require

        name = name or DEFAULT
        if name in PACKS:
            return require(name)
        if name not in MODELS:
            raise InputError(f"unknown bundled model '{name}'", field="--model")
        return converted_dir()
    if backend == "hf" and name:
        path = Path(name).expanduser()
        if not (path / "config.json").is_file():
            raise InputError(f"'{name}' is not a model folder with config.json", field="--model")
        return path.resolve()
    raise InputError(f"tuning needs a local model: bundled or hf:PATH, not '{spec}'", field="--model")


def read_pairs(pairs_dir: str | Path) -> tuple[list[dict], dict]:
    """(the train split's rows, pairs.json) of a `rolebound data pairs` folder."""
    from .pairs import MARKER as PAIRS_MARKER

    d = Path(pairs_dir)
    meta_path = d / PAIRS_MARKER
    if not meta_path.is_file():
        raise InputError("no pairs.json here; make pairs with `rolebound data pairs`", file=str(d))
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or not isinstance(meta.get("hash"), str):
        raise InputError("not a pairs.json of `rolebound data pairs` (no hash)", file=str(meta_path))
    rows = []
    path = d / "train.jsonl"
    for n, row in jsonl_lines(path):
        for key in ("prompt", "chosen", "rejected"):
            msgs = row.get(key) if isinstance(row, dict) else None
            if not isinstance(msgs, list) or not msgs or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in msgs):
                raise InputError("must be a list of messages (role, content)", file=str(path), line=n, field=key)
        rows.append({k: row[k] for k in ("prompt", "chosen", "rejected")})
    if not rows:
        raise InputError("the train split is empty: no pair to train on", file=str(path))
    return rows, meta


def _claim(out: Path, want: dict) -> bool:
    """out as this tune's folder; True when it holds this tune's checkpoints (resume)."""
    from .store import claim_folder

    claim_folder(out, marker=MARKER, what="tune")
    marker = out / MARKER
    if not marker.is_file():
        return False
    had = read_json(marker)
    mine = {k: want[k] for k in ("pairs_hash", "base", "settings")}
    theirs = {k: had.get(k) for k in mine} if isinstance(had, dict) else {}
    if theirs != mine:
        diff = [k for k in mine if theirs.get(k) != mine[k]]
        raise InputError(f"holds another tune (its {', '.join(diff)} differ); give another --out", file=str(out))
    return any((out / CHECKPOINTS).glob("checkpoint-*"))


def tune(pairs_dir: str | Path, model: str, out: str | Path, settings: TuneSettings = TuneSettings(),
         *, threads: int | None = None) -> dict[str, Any]:
    """Train a LoRA adapter with DPO on the pairs' train split; returns tune.json's content."""
    out = Path(out)
    rows, pairs_meta = read_pairs(pairs_dir)
    base = base_folder(model)
    want = {"pairs": str(Path(pairs_dir)), "pairs_hash": pairs_meta["hash"], "train_pairs": len(rows),
            "heldout_characters": pairs_meta.get("characters", {}).get("test", []),
            "model": model, "base": {"folder": base.name, "config_sha": file_sha(base / "config.json")},
            "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()}}
    resume = _claim(out, want)
    _fix_packages()
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / MARKER, json.dumps({**want, "status": "training"}, indent=1) + "\n")

    import warnings

    import datasets
    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)      # transformers' renames, said per step
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from .threads import resolve_override

    n_threads = resolve_override(threads)[0] or os.cpu_count() or 1
    torch.set_num_threads(int(n_threads))
    torch.manual_seed(settings.seed)
    tok = AutoTokenizer.from_pretrained(base)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    cpu = not torch.cuda.is_available()
    net = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32 if cpu else torch.bfloat16)
    args = DPOConfig(output_dir=str(out / CHECKPOINTS), per_device_train_batch_size=settings.batch_size,
                     num_train_epochs=settings.epochs, max_steps=settings.max_steps,
                     learning_rate=settings.learning_rate, beta=settings.beta, max_length=settings.max_length,
                     seed=settings.seed, data_seed=settings.seed, use_cpu=cpu, report_to=[], logging_steps=1,
                     save_strategy="steps", save_steps=settings.save_steps, save_total_limit=2,
                     disable_tqdm=False)
    lora = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, target_modules=list(settings.target_modules),
                      task_type="CAUSAL_LM")
    trainer = DPOTrainer(model=net, args=args, train_dataset=datasets.Dataset.from_list(rows),
                         processing_class=tok, peft_config=lora)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    wall = time.perf_counter() - t0
    trainer.model.save_pretrained(str(out))
    logs = [h for h in trainer.state.log_history if "loss" in h]
    first, last = (logs[0], logs[-1]) if logs else ({}, {})
    keep = ("loss", "rewards/accuracies", "rewards/margins")
    done = {**want, "status": "done", "steps": result.global_step, "resumed": resume,
            "wall_s": round(wall, 1), "threads": torch.get_num_threads(),
            "first_log": {k: first.get(k) for k in keep}, "last_log": {k: last.get(k) for k in keep},
            "adapter_sha": file_sha(out / "adapter_model.safetensors")}
    write_text_atomic(out / MARKER, json.dumps(done, indent=1) + "\n")
    return done
