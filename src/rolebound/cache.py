"""Disk cache for work derived from the items alone (embeddings, similarity tables, indexes).

An entry is one file under <cache_dir>/derived/<kind>/ (or $ROLEBOUND_DERIVED_DIR/<kind>/), named by a hash of everything its
value depends on (the inputs and the identity of the model that computed it). Files are
written to a temporary name and renamed, so a reader never sees half a file and two processes
computing the same entry both end with a whole one. A file that cannot be read is recomputed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .paths import derived_dir

# Bump to drop every derived entry (when what a kind stores changes meaning).
REV = 1


def key_of(*parts: Any) -> str:
    blob = json.dumps([REV, *parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def entry_path(kind: str, key: str, suffix: str) -> Path:
    return derived_dir() / kind / f"{key}{suffix}"


def _write_atomic(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached_json(kind: str, parts: Any, compute: Callable[[], Any]):
    """compute()'s JSON-able value, from disk if an entry for `parts` exists."""
    path = entry_path(kind, key_of(kind, parts), ".json")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass                                   # missing or unreadable: compute it again
    value = compute()
    try:
        _write_atomic(path, lambda fh: json.dump({"value": value}, fh, ensure_ascii=False), binary=False)
    except OSError:
        pass                                   # a read-only cache only costs the recomputation
    return value


def cached_array(kind: str, parts: Any, compute: Callable[[], Any], rows: int | None = None):
    """compute()'s numpy array, from disk if an entry for `parts` exists (and has `rows` rows)."""
    import numpy as np

    path = entry_path(kind, key_of(kind, parts), ".npy")
    try:
        arr = np.load(path, allow_pickle=False)
        if rows is None or (arr.ndim >= 1 and arr.shape[0] == rows):
            return arr
    except (OSError, ValueError, EOFError):
        pass
    arr = np.asarray(compute())
    try:
        _write_atomic(path, lambda fh: np.save(fh, arr, allow_pickle=False), binary=True)
    except OSError:
        pass
    return arr


@functools.lru_cache(maxsize=32)
def folder_identity(folder: str) -> dict:
    """What a model folder's outputs depend on, read without loading it: its path, the content of
    its small files (configs, tokenizer) and the size and modification time of the large ones."""
    root = Path(folder).resolve()
    files = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        st = f.stat()
        rel = str(f.relative_to(root))
        if st.st_size <= 4 << 20:
            files.append([rel, hashlib.sha256(f.read_bytes()).hexdigest()[:16]])
        else:
            files.append([rel, st.st_size, st.st_mtime_ns])
    return {"path": str(root), "files": files}
