"""What rolebound keeps on disk: a run's folder (manifest, append-only records, metrics), the
shared SQLite response cache (model replies), the derived cache (work computed from the items
alone), and the folders they live in between runs (cache_dir, derived_dir, model_dir,
shared_root).

records.jsonl is the source of truth. Each record is written and flushed as soon as its call
returns, so `kill -9` loses at most the calls in flight. A torn last line (killed mid-write) is
cut off when the run is reopened. On reading, the last record per call_id wins: a failed call
that succeeds on resume supersedes its error record. Every line is strict JSON that reads back
(records.record_line); a line written by an older version whose reply fields do not read back
(a NaN log-prob, an object for finish_reason) is read as a failed call of that call_id, with one
warning line, so a resume makes the call again and its new record supersedes the line.

The derived cache: embeddings, similarity tables, indexes, figures' PNGs. An entry is one file
under <cache_dir>/derived/<kind>/ (or $ROLEBOUND_DERIVED_DIR/<kind>/), named by a hash of
everything its value depends on (the inputs and the identity of the model that computed it).
Files are written to a temporary name and renamed, so a reader never sees half a file and two
processes computing the same entry both end with a whole one. A file that cannot be read is
recomputed. Vectors of single texts (embeddings) are rows of one SQLite file per kind instead
(`cached_rows`), so a run over more or fewer items reuses every text it shares with an earlier one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from pydantic import ValidationError

from .errors import InputError, RoleboundError, RunDirError
from .io import atomic_path, open_regular, read_regular, refuse_package, validate_record, write_text_atomic
from .records import REPLY_FIELDS, Record, RunManifest, loc_text, record_line
from .term import visible

MANIFEST, RECORDS, METRICS = "manifest.json", "records.jsonl", "metrics.json"
# what a run folder may hold before its manifest is written (a first run killed at its start)
_BEFORE_MANIFEST = frozenset({".lock", RECORDS})


def claim_folder(path: str | Path, *, marker: str, before: frozenset[str] = frozenset(), flag: str = "--out",
                 what: str = "run") -> Path:
    """`path` as an output folder, if it is one the tool may write into: new, empty, holding
    `marker` (its own earlier output) or only the names in `before`. Anything else is an
    InputError in one line, before a file is made there: a user's folder is never written into."""
    path = Path(path)
    if not str(path).strip():
        raise InputError("is empty; give a folder", field=flag)
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot be resolved ({exc}); give another {flag}", file=str(path)) from None
    if real == Path(real.anchor):
        raise InputError(f"is the root folder; give {flag} a folder of the {what}'s own", file=str(path))
    refuse_package(path, flag)
    if not path.exists():
        if path.is_symlink():
            raise InputError(f"is a broken symbolic link; give another {flag}", file=str(path))
        return path
    if not path.is_dir():
        raise InputError(f"is not a folder; give {flag} a folder", file=str(path))
    if (path / marker).exists() or (path / marker).is_symlink():
        return path
    try:
        others = sorted(n for n in os.listdir(path) if n not in before and not _is_temp(n))
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc}); give another {flag}", file=str(path)) from None
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        a = "an" if what[:1] in "aeiou" else "a"
        raise InputError(f"not {a} {what} folder, and not empty ({shown}); {a} {what} writes only into a new or "
                         f"empty folder, or one holding the same {what}: give another {flag}", file=str(path))
    return path


def claim_run_folder(path: str | Path) -> Path:
    return claim_folder(path, marker=MANIFEST, before=_BEFORE_MANIFEST)


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")      # io.atomic_path's, left by a kill


@contextlib.contextmanager
def clear_new_folder(path: str | Path) -> Iterator[None]:
    """What the block adds to `path` (and the folders made above it) is removed again if the block
    fails: a refused command leaves nothing behind, so the same --out works on a retry. What was
    there before is never touched."""
    path = Path(path)
    top = path
    while not top.parent.exists() and top.parent != top:
        top = top.parent                        # the first folder the block will make
    existed = path.is_dir()
    before = set(os.listdir(path)) if existed else set()
    try:
        yield
    except BaseException:
        try:
            if not existed and (top.exists() or top.is_symlink()):
                if top.is_dir() and not top.is_symlink():
                    shutil.rmtree(top)
            elif existed:
                for name in set(os.listdir(path)) - before:
                    p = path / name
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        except OSError:
            pass
        raise


def refuse_link(path: Path) -> None:
    """A file the tool writes is never a symbolic link: writing through one changes its target."""
    if path.is_symlink():
        raise InputError("is a symbolic link; a run writes only its own files, never through a link "
                         "(remove it, or use another --out)", file=str(path))


def iter_records(path: Path) -> Iterator[tuple[int, dict]]:
    with open_regular(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                yield lineno, json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                if not raw.endswith(b"\n"):         # the last line, torn by a kill mid-write: read past it
                    warn_torn(path, lineno, len(raw), "the run's command cuts it and makes that call again")
                    return
                raise InputError("corrupt record (not JSON)", file=str(path), line=lineno) from None


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def warn_torn(path: Path, lineno: int, size: int, then: str) -> None:
    """One warning line for a torn last line of records.jsonl (what `run` cuts, `report` reads past)."""
    seen = (str(path), -lineno, size)
    if seen not in _WARNED:
        _WARNED.add(seen)
        print(visible(f"warning: {path}:{lineno}: a torn last line ({size} bytes, left by a stop mid-write) is "
                      f"read past; {then}", newlines=False), file=sys.stderr, flush=True)


def read_record(obj: Any, *, file: Path, line: int) -> tuple[Record, str | None]:
    """(record, None), or for a line whose only unreadable fields are the reply's, (a failed
    call of that call_id, why); anything else that does not read is an InputError naming the
    file, line and field."""
    try:
        return Record.model_validate(obj), None
    except ValidationError as exc:
        errors = exc.errors()
        if isinstance(obj, dict) and all(e["loc"] and e["loc"][0] in REPLY_FIELDS for e in errors):
            why = f"field '{loc_text(errors[0]['loc'])}': {errors[0]['msg'].removeprefix('Value error, ')}"
            kept = {k: v for k, v in obj.items() if k not in REPLY_FIELDS}
            try:
                return Record.model_validate({**kept, "error": f"unreadable reply ({why})"}), why
            except ValidationError:
                pass
    return validate_record(Record, obj, file=file, line=line), None


_WARNED: set[tuple[str, int, int]] = set()


def warn_unreadable(path: Path, bad: list[tuple[int, str]], then: str) -> None:
    """One warning line (once a process) for the records read as failed calls because their
    reply did not read back."""
    seen = (str(path), len(bad), bad[0][0] if bad else 0)
    if bad and seen not in _WARNED:
        _WARNED.add(seen)
        n = len(bad)
        print(visible(f"warning: {path}: {n} record{'s' if n != 1 else ''} with a reply that cannot be read back "
                      f"(line {bad[0][0]}: {bad[0][1]}) {'are' if n != 1 else 'is'} read as failed calls; {then}",
                      newlines=False), file=sys.stderr, flush=True)


def run_manifest(run_dir: str | Path) -> RunManifest | None:
    """The run's manifest, or None where the folder has none yet (a first run killed at its start)."""
    rd = RunDir(run_dir)
    return rd.read_manifest() if rd.exists() else None


def check_belongs(rec: Record, manifest: RunManifest | None, *, file: Path, line: int) -> None:
    """A record of another run (another suite, or another model under test) appended to this
    run's records.jsonl is an InputError naming its line: its figures would be mixed in silently."""
    if manifest is None:
        return
    if rec.suite != manifest.suite:
        raise InputError(f"a record of suite '{rec.suite}' in a run of suite '{manifest.suite}' (its manifest.json); "
                         "records of another run were added to this file", file=str(file), line=line, field="suite")
    if rec.role == "model" and rec.model and rec.model != manifest.model:
        raise InputError(f"a record of model '{rec.model}' in a run of model '{manifest.model}' (its manifest.json); "
                         "records of another run were added to this file", file=str(file), line=line, field="model")


def load_records(run_dir: str | Path, *, latest: bool = True) -> list[Record]:
    """All records of a run; with latest=True only the last one per call_id, in first-seen order.
    Every record must belong to the run its manifest describes (check_belongs)."""
    path = Path(run_dir) / RECORDS
    if not path.exists():
        raise InputError("no records.jsonl here; is this a run directory?", file=str(path))
    manifest = run_manifest(run_dir)
    recs: dict[str, Record] = {}
    every = []
    bad: dict[str, tuple[int, str]] = {}
    for lineno, obj in iter_records(path):
        rec, why = read_record(obj, file=path, line=lineno)
        check_belongs(rec, manifest, file=path, line=lineno)
        every.append(rec)
        recs[rec.call_id] = rec
        if why:
            bad[rec.call_id] = (lineno, why)
        else:
            bad.pop(rec.call_id, None)       # superseded by a record that reads
    warn_unreadable(path, sorted(bad.values()), "rerun the run's command to make those calls again")
    return list(recs.values()) if latest else every


def records_frame(run_dir: str | Path):
    """A run's records as a pandas DataFrame, meta fields flattened into columns."""
    import pandas as pd

    rows = []
    for r in load_records(run_dir):
        d = r.model_dump()
        meta = d.pop("meta") or {}
        for k, v in meta.items():
            d.setdefault(k, v)
        rows.append(d)
    return pd.DataFrame(rows)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fh = None
        self._lock_fh = None
        self._write_lock = threading.Lock()

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> RunManifest:
        path = self.manifest_path
        try:
            data = json.loads(read_regular(path).decode("utf-8"))
        except FileNotFoundError:
            raise InputError("no manifest.json; is this a run directory?", file=str(path)) from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"unreadable manifest (not JSON: {exc})", file=str(path)) from None
        if not isinstance(data, dict):
            raise InputError(f"unreadable manifest: expected a JSON object, got {type(data).__name__}",
                             file=str(path))
        return validate_record(RunManifest, data, file=path, line=None)

    def write_manifest(self, manifest: RunManifest) -> None:
        self.write_text(MANIFEST, manifest.model_dump_json(indent=2))

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def write_text(self, name: str, text: str) -> Path:
        """Every file but records.jsonl is replaced whole (temp file + rename: a symbolic link
        there is replaced, its target never written)."""
        target = self.path / name
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            return write_text_atomic(target, text)
        except OSError as exc:
            raise RunDirError(target, exc) from None

    def remove(self, name: str) -> None:
        try:
            (self.path / name).unlink(missing_ok=True)
        except OSError as exc:
            raise RunDirError(self.path / name, exc) from None

    # -- exclusive use ----------------------------------------------------------------------
    def lock(self) -> None:
        """Exclusive use of the folder, taken before anything in it is read for writing."""
        path = self.path / ".lock"
        refuse_link(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # never truncated, never through a link: the file only carries the lock
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            self._lock_fh = os.fdopen(fd, "w")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                refuse_link(path)
            raise RunDirError(path, exc) from None
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise RoleboundError(f"another rolebound process is writing {self.path}; wait for it to "
                                 "finish or use another --out") from None

    def unlock(self) -> None:
        if self._lock_fh:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    # -- records ----------------------------------------------------------------------------
    def repair(self) -> int:
        """Cut a torn last line left by a kill mid-write; returns bytes removed."""
        p = self.records_path
        refuse_link(p)
        if not p.exists():
            return 0
        if not p.is_file():
            raise InputError("is not a regular file; a run's records.jsonl must be one", file=str(p))
        try:
            with os.fdopen(os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as fh:
                data = fh.read()
            if not data or data.endswith(b"\n"):
                return 0
            cut = data.rfind(b"\n") + 1
            whole = _parses(data[cut:])     # only its newline missing: keep it, as the readers do
            if not whole:
                warn_torn(p, data.count(b"\n", 0, cut) + 1, len(data) - cut, "it is cut, and its call runs again")
            fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if whole else 0))
            try:
                if whole:
                    os.write(fd, b"\n")
                else:
                    os.ftruncate(fd, cut)
            finally:
                os.close(fd)
            if whole:
                return 0
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                refuse_link(p)
            raise RunDirError(p, exc) from None
        return len(data) - cut

    def completed(self) -> dict[str, Record]:
        """call_id -> last successful record; failed calls are left out so they run again."""
        if not self.records_path.exists():
            return {}
        done: dict[str, Record] = {}
        bad: dict[str, tuple[int, str]] = {}
        manifest = run_manifest(self.path)
        for lineno, obj in iter_records(self.records_path):
            rec, why = read_record(obj, file=self.records_path, line=lineno)
            check_belongs(rec, manifest, file=self.records_path, line=lineno)
            if why:
                bad[rec.call_id] = (lineno, why)
            else:
                bad.pop(rec.call_id, None)
            if rec.error is None:
                done[rec.call_id] = rec
            else:
                done.pop(rec.call_id, None)
        warn_unreadable(self.records_path, sorted(bad.values()), "their calls run again")
        return done

    def open_for_append(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644)
            self._fh = os.fdopen(fd, "a", encoding="utf-8")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                refuse_link(self.records_path)
            raise RunDirError(self.records_path, exc) from None

    def append(self, rec: Record, line: str | None = None) -> None:
        """Write one record (`line`: its record_line(), when the caller has it already)."""
        line = (line if line is not None else record_line(rec)) + "\n"
        with self._write_lock:
            try:
                self._fh.write(line)
                self._fh.flush()
            except OSError as exc:     # disk full: end the run, not just this item
                raise RunDirError(self.records_path, exc) from None

    def close(self) -> None:
        if self._fh:
            fh, self._fh = self._fh, None
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError:
                pass        # already reported by append(); the lines written so far are on disk
            finally:
                try:
                    fh.close()
                except OSError:
                    pass
        self.unlock()


# -- where rolebound keeps things between runs ----------------------------------------------------
def cache_dir() -> Path:
    """ROLEBOUND_CACHE_DIR, else $XDG_CACHE_HOME/rolebound, else ~/.cache/rolebound."""
    env = os.environ.get("ROLEBOUND_CACHE_DIR")
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "rolebound"
    return make_folder(path, "ROLEBOUND_CACHE_DIR" if env else "XDG_CACHE_HOME")


def make_folder(path: Path, env: str) -> Path:
    """Make the folder `path` (set by `env`, or under it): a file in its way, or a full disk, is
    one line that says so."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"is not a folder (it, or a part of it, is a file); set {env} to a folder",
                         file=str(path), field=env) from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise RoleboundError(f"cannot make the folder {path}: the disk is full (ENOSPC); "
                                 "free space on it") from None
        raise
    return path


def derived_dir() -> Path:
    """Work derived from items alone (embeddings, similarity tables): ROLEBOUND_DERIVED_DIR, else
    <cache_dir>/derived. Its entries are keyed by their inputs, so several caches may share one."""
    env = os.environ.get("ROLEBOUND_DERIVED_DIR")
    return Path(env) if env else cache_dir() / "derived"


def model_dir() -> Path:
    """Converted local models (ROLEBOUND_MODEL_DIR, else <cache_dir>/models)."""
    env = os.environ.get("ROLEBOUND_MODEL_DIR")
    path = Path(env) if env else cache_dir() / "models"
    return make_folder(path, "ROLEBOUND_MODEL_DIR" if env else "ROLEBOUND_CACHE_DIR")


def shared_root() -> Path | None:
    """The public data beside the checkout: ROLEBOUND_SHARED, else ../shared of the checkout (or of
    the working directory) when present; None otherwise."""
    env = os.environ.get("ROLEBOUND_SHARED")
    if env:
        return Path(env)
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (base.parent / "shared").is_dir():
            return base.parent / "shared"
    return None


class ResponseCache:
    """key -> response JSON, shared across runs and processes (WAL mode)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_dir() / "responses.sqlite"
        make_folder(self.path.parent, "ROLEBOUND_CACHE_DIR")
        if self.path.exists() and not self.path.is_file():
            raise self._unusable("not a regular file")
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT "
                                   "NOT NULL, created TEXT DEFAULT CURRENT_TIMESTAMP)")
                self._conn.commit()
        except sqlite3.Error as exc:
            raise self._unusable(exc) from None
        self.hits = 0
        self.misses = 0

    def _unusable(self, why) -> RoleboundError:
        # OperationalError "database is locked" past the timeout is not corruption: say so apart
        if "locked" in str(why):
            return RoleboundError(f"the response cache {self.path} is locked by another process ({why}); "
                                  "wait, or run with --no-cache")
        # a full disk is not a broken cache: its replies (perhaps paid for) stay where they are
        if getattr(why, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(why) or \
                getattr(why, "errno", None) == errno.ENOSPC:
            return RoleboundError(f"the response cache {self.path} cannot be written: the disk is full (ENOSPC); "
                                  "free space on it, or run with --no-cache")
        if getattr(why, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_IOERR:
            return RoleboundError(f"the response cache {self.path} cannot be written ({why}; is the disk full or "
                                  "failing?); free space on it, or run with --no-cache")
        return RoleboundError(f"the response cache {self.path} cannot be read ({why}); move it away (it is only a "
                              "cache: a new one is made), or run with --no-cache")

    def get(self, key: str) -> dict | None:
        """The value stored under key; None if there is none, or it is not a JSON object (the
        caller asks again, and put() replaces it)."""
        with self._lock:
            try:
                row = self._conn.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None
        try:
            value = json.loads(row[0]) if row is not None else None
        except (TypeError, ValueError):
            value = None
        if not isinstance(value, dict):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict) -> None:
        """Strict JSON only (ValueError for NaN or an infinity): what is cached must read back."""
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")            # a lone surrogate: UnicodeEncodeError, a ValueError too
        with self._lock:
            try:
                self._conn.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, text))
                self._conn.commit()
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def complete_lines(path: Path, offset: int) -> bytes:
    """The whole lines appended to `path` since byte `offset` (a line still being written waits)."""
    if not path.exists():
        return b""
    with open_regular(path) as fh:
        fh.seek(offset)
        chunk = fh.read()
    return chunk[: chunk.rfind(b"\n") + 1]


# -- the derived cache: work computed from the items alone -----------------------------------------
# Bump to drop every derived entry (when what a kind stores changes meaning).
DERIVED_REV = 1


def key_of(*parts: Any) -> str:
    blob = json.dumps([DERIVED_REV, *parts], sort_keys=True, ensure_ascii=False, default=str)
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
        return json.loads(read_regular(path).decode("utf-8"))["value"]
    except (OSError, ValueError, KeyError, TypeError, InputError):
        pass                                   # missing, unreadable or not a file (a FIFO): compute it again
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
        return read_regular(path)
    except (OSError, InputError):
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
