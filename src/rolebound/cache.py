"""Disk cache for work derived from the items alone (embeddings, similarity tables, indexes).

An entry is one file under <cache_dir>/derived/<kind>/ (or $ROLEBOUND_DERIVED_DIR/<kind>/), named by a hash of everything its
value depends on (the inputs and the identity of the model that computed it). Files are
written to a temporary name and renamed, so a reader never sees half a file and two processes
computing the same entry both end with a whole one. A file that cannot be read is recomputed.
Vectors of single texts (embeddings) are rows of one SQLite file per kind instead (`cached_rows`),
so a run over more or fewer items reuses every text it shares with an earlier one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import RunDirError
from .io import atomic_path
from .store import derived_dir

# Bump to drop every derived entry (when what a kind stores changes meaning).
REV = 1


def key_of(*parts: Any) -> str:
    blob = json.dumps([REV, *parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def entry_path(kind: str, key: str, suffix: str) -> Path:
    return derived_dir() / kind / f"{key}{suffix}"


def _write_atomic(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    """Through io.atomic_path (a temp name per process and thread, renamed whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb" if binary else "w",
                                        **({} if binary else {"encoding": "utf-8"})) as fh:
        write(fh)


# A read-only or full cache only costs the recomputation (atomic_path says RunDirError).
UNWRITABLE = (OSError, RunDirError)


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
    except UNWRITABLE:
        pass
    return value


def cached_bytes(kind: str, parts: Any, compute: Callable[[], bytes], suffix: str = ".bin") -> bytes:
    """compute()'s bytes, from disk if an entry for `parts` exists."""
    path = entry_path(kind, key_of(kind, parts), suffix)
    try:
        return path.read_bytes()
    except OSError:
        pass
    value = compute()
    try:
        _write_atomic(path, lambda fh: fh.write(value), binary=True)
    except UNWRITABLE:
        pass
    return value


def cached_rows(kind: str, ident: Any, texts: Sequence[str], compute: Callable[[list[str]], Any]):
    """One float32 vector per text, each kept on its own under (kind, ident, text) in one SQLite file
    per kind: a later call with any subset, reordering or superset of the texts computes only those
    never stored (compute(missing) returns their rows in order). Rows follow `texts`. A text's vector
    is the one first computed for it, whatever batch it came in (batching can move float32 sentence
    embeddings in their last bits). An unreadable store is only a miss; a read-only one only costs the
    recomputation."""
    import numpy as np

    texts = list(texts)
    keys = {t: key_of(kind, ident, t) for t in dict.fromkeys(texts)}
    found: dict[str, Any] = {}
    path = derived_dir() / kind / "rows.sqlite"
    try:
        with _rows_db(path) as db:
            names = list(keys.values())
            for i in range(0, len(names), 500):
                chunk = names[i:i + 500]
                q = f"SELECT key, dim, vec FROM rows WHERE key IN ({','.join('?' * len(chunk))})"
                for key, dim, blob in db.execute(q, chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32).reshape(dim)
    except (sqlite3.Error, OSError, ValueError) as exc:
        found = {}
        if type(exc) is sqlite3.DatabaseError:      # not a database (torn, overwritten): start it again
            path.unlink(missing_ok=True)
    missing = [t for t, k in keys.items() if k not in found]
    if missing:
        new = np.asarray(compute(missing), dtype=np.float32).reshape(len(missing), -1)
        for t, v in zip(missing, new):
            found[keys[t]] = v
        try:
            with _rows_db(path) as db:
                db.executemany("INSERT OR REPLACE INTO rows VALUES (?, ?, ?)",
                               [(keys[t], int(v.shape[0]), v.tobytes()) for t, v in zip(missing, new)])
        except (sqlite3.Error, OSError):
            pass
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([found[keys[t]] for t in texts])


@contextlib.contextmanager
def _rows_db(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=60)      # several processes (xdist, Ray workers) share it
    try:
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS rows (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
            yield db
    finally:
        db.close()


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
