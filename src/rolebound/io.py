"""Reading user files (JSONL, YAML, CSV) into pydantic models with errors that point at file, line, field."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, TypeVar

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import InputError, RunDirError

T = TypeVar("T", bound=BaseModel)


def _loc_str(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _first_error(exc: ValidationError) -> tuple[tuple, str]:
    err = exc.errors()[0]
    return tuple(err.get("loc", ())), err.get("msg", str(exc)).removeprefix("Value error, ")


def expected(err: dict, msg: str) -> str:
    """pydantic's message, with what it got where that helps ('missing' needs no value)."""
    msg = msg.removeprefix("Value error, ")
    if err.get("type") in ("missing", "extra_forbidden", "value_error") or "input" not in err:
        return msg
    got = repr(err["input"])
    return f"{msg} (got {got if len(got) <= 60 else got[:57] + '...'})"


def validate_record(model: type[T], data: Any, *, file: str | Path | None, line: int | None,
                    loc_prefix: tuple = ()) -> T:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc, msg = _first_error(exc)
        n = len(exc.errors())
        more = f" (and {n - 1} more problem{'s' if n > 2 else ''})" if n > 1 else ""
        err = InputError(expected(exc.errors()[0], msg) + more, file=str(file) if file else None, line=line,
                         field=_loc_str(loc_prefix + loc) or None)
        err.dump = str(exc)         # the whole of pydantic's report, shown with --debug
        raise err from None


NOT_REGULAR = "not a regular file (a device, FIFO or socket); give a file"


def check_file(path: str | Path) -> Path:
    """The path, if it names a readable file; else an InputError naming it."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a file", file=str(path))
    if not path.is_file():      # read, /dev/zero never ends and a FIFO waits for a writer
        raise InputError(NOT_REGULAR, file=str(path))
    return path


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for reading (binary), if it is a regular file; a folder, FIFO or device is an
    InputError naming it (a FIFO would wait for a writer, /dev/zero never ends). Opened without
    blocking and checked on the open file, so a FIFO swapped in after a check cannot hang the
    reader. A missing file is the OSError (FileNotFoundError) callers already expect."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError("is a directory, expected a file" if stat.S_ISDIR(mode) else NOT_REGULAR,
                             file=str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path) -> bytes:
    """The bytes of a regular file (open_regular's checks)."""
    with open_regular(path) as fh:
        return fh.read()


# the installed package: nothing is ever written inside it (its data is what every run reads)
PACKAGE = Path(__file__).resolve().parent


def refuse_package(path: str | Path, flag: str = "--out") -> None:
    """An InputError when `path` lies inside the installed package."""
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError):
        return
    if real == PACKAGE or PACKAGE in real.parents:
        raise InputError(f"{path} is inside the installed rolebound package ({PACKAGE}); nothing is written "
                         "there: give a path outside it", field=flag)


def inside(root: str | Path, part: str | Path, *, file: str | Path | None = None, field: str | None = None,
           line: int | None = None) -> Path:
    """root / part, if it stays inside root once resolved (`..`, an absolute part or a link
    pointing out of it are refused); `part` comes from data, `file`/`field` name where."""
    root = Path(root)
    where = dict(file=str(file) if file else None, line=line, field=field)
    if not isinstance(part, (str, Path)):
        raise InputError(f"expected a path (text), got {type(part).__name__}", **where)
    text = str(part)
    path = root / part
    try:
        real_root, real = root.resolve(), path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise InputError(f"{text!r} cannot be resolved ({exc})", **where) from None
    if not text.strip() or real == real_root or real_root not in real.parents:
        raise InputError(f"{text!r} leaves {root} (a path from data stays inside its folder)", **where)
    return path


def check_output_file(out: str | Path, *sources: str | Path, flag: str = "--out",
                      what: str = "the source being imported") -> Path:
    """`out` as a file to write, if writing it harms nothing: not a link, a folder or a device
    (/dev/null), not inside the installed package, and not one of the `sources` being read."""
    out = Path(out)
    if not str(out).strip():
        raise InputError("is empty; give a file", field=flag)
    refuse_package(out, flag)
    if out.is_symlink():
        raise InputError(f"{out} is a symbolic link; give the file itself (nothing is written through a link)",
                         field=flag)
    if out.exists() and not out.is_file():
        raise InputError(f"{out} is not a regular file", field=flag)
    real = out.resolve()
    for src in map(Path, sources):
        if not src.exists():
            continue
        s = src.resolve()
        # the file read, or (a source folder) a file in it that may be read: `x/../src` too
        if real == s or (out.exists() and os.path.samefile(src, out)) or (src.is_dir() and out.exists()
                                                                          and s in real.parents):
            raise InputError(f"{out} is {what}" + (" (or a file in it)" if src.is_dir() else "")
                             + "; give another file", field=flag)
    return out


def _not_utf8(path: Path, exc: UnicodeDecodeError, line: int | None = None) -> InputError:
    return InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8",
                      file=str(path), line=line)


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?")


def json_loads(text: str) -> Any:
    """json.loads, where JSON nested past Python's recursion limit and a lone surrogate escape
    (\\ud800: no character, which no file or server takes) are a JSONDecodeError like any other."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep", text, 0) from None
    if "\\u" in text and _SURROGATE.search(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            lone = next((m for m in _SURROGATE.finditer(text) if len(m.group(0)) == 6), None)
            pos = lone.start() if lone else 0
            raise json.JSONDecodeError(f"{text[pos:pos + 6]} is half a surrogate pair, not a character",
                                       text, pos) from None
    return obj


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) a line; blank lines and lines starting with # are skipped.
    Lazy, so a caller that checks each object reports the first bad line, JSON or not."""
    path = check_file(path)
    with open_regular(path) as fh:
        for lineno, data in enumerate(fh, 1):
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, exc, lineno) from None
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            try:
                obj = json_loads(s)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                 file=str(path), line=lineno) from None
            yield lineno, obj


def read_jsonl(path: str | Path, model: type[T] | None = None) -> list:
    """One object a line; blank lines and lines starting with # are skipped."""
    return [validate_record(model, obj, file=path, line=lineno) if model else obj
            for lineno, obj in jsonl_lines(path)]


MAX_YAML_REPEATS = 1_000_000     # values aliases may repeat in one document (a real file: a few)


class YAMLBomb(yaml.YAMLError):
    """A YAML document whose aliases expand past MAX_YAML_REPEATS values."""


def _expanded(node: yaml.Node) -> int:
    """How many values a YAML node stands for once its aliases are expanded, without expanding
    them (a "billion laughs" file is a few lines of aliases to aliases); a node that holds
    itself through an alias is refused."""
    memo: dict[int, int] = {}
    todo: list[tuple[yaml.Node, bool]] = [(node, False)]
    busy: set[int] = set()
    while todo:
        n, done = todo.pop()
        if id(n) in memo:
            continue
        kids = [] if isinstance(n, yaml.ScalarNode) else (
            [x for pair in n.value for x in pair] if isinstance(n, yaml.MappingNode) else list(n.value))
        if done:
            busy.discard(id(n))
            memo[id(n)] = min(1 + sum(memo[id(k)] for k in kids), 1 << 62)
            continue
        if id(n) in busy:
            raise YAMLBomb("an alias holds the value it names (a loop)")
        busy.add(id(n))
        todo.append((n, True))
        for k in kids:
            if id(k) in busy:
                raise YAMLBomb("an alias holds the value it names (a loop)")
            if id(k) not in memo:
                todo.append((k, False))
    return memo[id(node)]


def _distinct(node: yaml.Node) -> int:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            todo.extend(x for pair in n.value for x in pair)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
    return len(seen)


class _BoundedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):   # libyaml: 5x faster on the starter sets
    """SafeLoader that refuses a document whose aliases repeat more than MAX_YAML_REPEATS values."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        if _expanded(node) - _distinct(node) > MAX_YAML_REPEATS:
            raise YAMLBomb(f"its aliases repeat over {MAX_YAML_REPEATS:,} values (an alias bomb?)")
        return self.construct_document(node)


def yaml_value(text: str) -> Any:
    """yaml.safe_load, bounded as read_yaml is (a `--set` value)."""
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - SafeLoader subclass


class _LineLoader(_BoundedLoader):
    """SafeLoader that remembers the line of every mapping and sequence entry."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False):
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        lines[key] = value_node.start_mark.line + 1
    return _LinedDict(mapping, node.start_mark.line + 1, lines)


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode, deep: bool = False):
    seq = yaml.SafeLoader.construct_sequence(loader, node, deep=deep)
    return _LinedList(seq, node.start_mark.line + 1, [v.start_mark.line + 1 for v in node.value])


class _LinedDict(dict):
    def __init__(self, data, line, lines):
        super().__init__(data)
        self.line, self.lines = line, lines


class _LinedList(list):
    def __init__(self, data, line, lines):
        super().__init__(data)
        self.line, self.lines = line, lines


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def line_of(obj: Any, loc: Iterable) -> int | None:
    """The deepest line we know for a pydantic error location inside a YAML document."""
    best = getattr(obj, "line", None)
    cur = obj
    for part in loc:
        lines = getattr(cur, "lines", None)
        try:
            if lines is not None:
                best = lines[part] if isinstance(cur, dict) else lines[int(part)]
            cur = cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            break
        best = getattr(cur, "line", best)
    return best


def read_yaml(path: str | Path) -> Any:
    path = check_file(path)
    try:
        text = read_regular(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc, text_line(exc)) from None
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None


def validate_yaml(model: Any, data: Any, *, file: str | Path) -> Any:
    """Validate a parsed YAML document (model may be a pydantic class or a type for TypeAdapter)."""
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return TypeAdapter(model).validate_python(data)
    except ValidationError as exc:
        loc, msg = _first_error(exc)
        raise InputError(msg, file=str(file), line=line_of(data, loc), field=_loc_str(loc) or None) from None


def csv_error(path: str | Path, reader, exc: csv.Error) -> InputError:
    """A CSV reader's error (a cell past csv.field_size_limit, a NUL byte) on its line."""
    msg = str(exc)
    if "field limit" in msg:
        msg = f"a cell over {csv.field_size_limit():,} characters (an unclosed quote?)"
    return InputError(f"unreadable CSV: {msg}", file=str(path), line=reader.line_num or None)


def read_csv_rows(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """Rows with their 1-based line number in the file (the header is line 1)."""
    path = check_file(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            try:
                return [(reader.line_num, row) for row in reader]
            except csv.Error as exc:
                raise csv_error(path, reader.reader, exc) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def refuse_filled_sheet(path: str | Path, columns: Iterable[str], flag: str = "--out") -> None:
    """A review sheet a build would write again, when someone has filled it in (a cell of `columns`
    not empty): an InputError naming its line, so a reviewer's work is never replaced."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return
    for lineno, row in read_csv_rows(path):
        filled = [c for c in columns if (row.get(c) or "").strip()]
        if filled:
            raise InputError(f"holds a reviewer's entries (column {filled[0]}); a new build would replace "
                             f"the sheet: move it away, or give another {flag}", file=str(path), line=lineno)


def csv_key(header: str) -> str:
    """A spreadsheet header as a key: lower case, spaces as _ ("Era End" -> era_end)."""
    return "_".join(header.strip().lower().split())


def read_csv_table(path: str | Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """A spreadsheet's header (csv_key) and its non-blank rows as (1-based line, {key: stripped
    cell}); a row with more cells than the header is an InputError naming its line."""
    path = check_file(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            try:
                header = [csv_key(h) for h in reader.fieldnames or []]
                rows = []
                for row in reader:
                    extra = row.pop(None, None)          # cells past the header
                    if extra and any((v or "").strip() for v in extra):
                        raise InputError("more cells than the header has columns", file=str(path),
                                         line=reader.line_num)
                    cells = {csv_key(k): (v or "").strip() for k, v in row.items()}
                    if any(cells.values()):
                        rows.append((reader.line_num, cells))
            except csv.Error as exc:
                raise csv_error(path, reader.reader, exc) from None
            return header, rows
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def text_line(exc: UnicodeDecodeError) -> int:
    """The 1-based line of a decode error in a whole-file decode."""
    return exc.object.count(b"\n", 0, exc.start) + 1


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """A temp path next to `target`; renamed onto it only if the block finishes, so a reader (or
    a full disk) never sees a half-written file."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.unlink(missing_ok=True)     # a link left at this name is never written through
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            Path(tmp).unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise RunDirError(target, exc) from None
        raise


@contextmanager
def atomic_dir(target: str | Path, prefix: str = ".tmp-") -> Iterator[Path]:
    """A temp folder next to `target` that replaces it only if the block finishes (a converted
    model is never seen half written); removed whatever happens."""
    target = Path(target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=prefix))
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_text_atomic(target: str | Path, text: str) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)


def write_bytes_atomic(target: str | Path, data: bytes) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stable_hash(obj: Any, n: int = 16) -> str:
    """Hash of a JSON-serialisable object, independent of key order."""
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:n]
