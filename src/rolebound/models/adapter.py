"""A tuned LoRA adapter (`rolebound tune`) in the local transformers engine: `--backend-opt
adapter=DIR` checks the folder and merges the adapter into the weights at load (docs/fix.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import BackendError
from ..io import file_sha256

MARKER = "tune.json"        # what `rolebound tune` writes beside the adapter
INSTALL_HINT = "pip install 'rolebound[fix]' (trl and peft; `make setup` installs them)"


def file_sha(path: Path) -> str:
    return file_sha256(path)[:16]


def check_adapter(path: str | Path, base: Path | None = None) -> dict[str, Any]:
    """A tuned adapter folder for `--backend-opt adapter=DIR`: its identity (part of every cache
    key, so a tuned model never reads the base model's cached replies). One line if it is not one,
    or if it was trained on another base model."""
    p = Path(str(path)).expanduser()
    if not (p / "adapter_config.json").is_file() or not (p / "adapter_model.safetensors").is_file():
        raise BackendError(f"adapter '{path}' is not a LoRA adapter folder (adapter_config.json and "
                           "adapter_model.safetensors; `rolebound tune` writes one)")
    info: dict[str, Any] = {"path": str(p.resolve()), "sha": file_sha(p / "adapter_model.safetensors")}
    meta = p / MARKER
    if base is not None and meta.is_file():
        try:
            had = json.loads(meta.read_text(encoding="utf-8"))
            sha = had["base"]["config_sha"]
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"adapter '{path}': {MARKER} is unreadable") from None
        if (base / "config.json").is_file() and sha != file_sha(base / "config.json"):
            raise BackendError(f"adapter '{path}' was trained on another base model ({had['base'].get('folder')})")
    return info


def merge_adapter(model, path: str | Path):
    """The model with the LoRA adapter merged into its weights (inference as fast as the base)."""
    try:
        from peft import PeftModel
    except ImportError:
        raise BackendError(f"--backend-opt adapter needs peft: {INSTALL_HINT}") from None
    return PeftModel.from_pretrained(model, str(path)).merge_and_unload()
