"""A local transformers model folder (`--model hf:/path/to/model`). Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

from ..errors import BackendError
from .local import LocalBackend


class HFBackend(LocalBackend):
    backend = "hf"

    def __init__(self, name: str, decoding=None, **options):
        path = Path(name).expanduser()
        if not (path / "config.json").exists():
            raise BackendError(
                f"hf backend needs a local model folder with config.json; '{name}' is not one "
                "(rolebound never downloads weights: save the model with save_pretrained first)")
        super().__init__(str(path.resolve()), decoding, **options)

    def model_path(self) -> Path:
        return Path(self.name)
