"""A suite's built items as a Hugging Face dataset folder (`rolebound data export`), and that folder
read back as a run's items (`--data hf:DIR`).

The folder holds one Parquet file per config and split (`<config>/test-00000-of-00001.parquet`, the
config taken from the item field the suite's `hub` names), a README.md whose YAML header is what
the Hub reads, an eval.yaml naming the inspect tasks, and rolebound.json: the suite, the item
order, which columns hold JSON text, and the data files the items were built from (copied under
source/, so `hf:DIR` can rebuild what the suite keeps beside its items: characters, indexes,
corpora). Read back, the items keep the dataset hash of the data they were built from when they
are those very items (a run on the export resumes a run on that data); edited rows hash apart.
pyarrow (the [hf] extra) is needed only here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from .errors import InputError
from .io import atomic_path, inside, open_regular, read_regular, stable_hash, validate_record, write_text_atomic

PREFIX = "hf:"
META = "rolebound.json"
SPLIT = "test"
# Hub licence ids that do not claim a licence the source never gave
NO_CLAIM = ("unknown", "other")


class ExportMeta(BaseModel):
    """rolebound.json, as `hf:DIR` reads it back (a hand-edited one is input like any other)."""

    model_config = ConfigDict(extra="allow")
    suite: str
    sources: list[str] = []
    configs: dict[str, int] = {}
    json_columns: list[str] = []
    order: list[str] = []


def _pyarrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("Parquet needs pyarrow: pip install 'rolebound[hf]'") from None
    return pyarrow, pq


def _config_of(suite, item) -> str:
    value = str(getattr(item, suite.hub.config_field))
    return suite.hub.configs.get(value, value)


def _json_columns(rows: list[dict[str, Any]]) -> set[str]:
    """Columns Parquet cannot hold as one plain type: dicts, nested lists, mixed value types."""
    out, kinds = set(), {}
    for row in rows:
        for k, v in row.items():
            if v is None:
                continue
            if isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)):
                out.add(k)
            kind = type(v).__name__ if not isinstance(v, list) else "list:" + ",".join(
                sorted({type(x).__name__ for x in v}))
            kinds.setdefault(k, set()).add(kind)
    return out | {k for k, ks in kinds.items() if len(ks) > 1 or any("," in x for x in ks)}


def size_category(n: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return name
    return "100K<n<1M"


def card_header(suite, configs: list[str], n: int, license_id: str) -> dict[str, Any]:
    h = suite.hub
    return {
        "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": f"{c}/{SPLIT}-*.parquet"}]}
                    for c in configs],
        "license": license_id, "language": list(h.language), "task_categories": list(h.task_categories),
        "size_categories": [size_category(n)], "pretty_name": h.pretty_name,
        "source_datasets": list(h.source_datasets) or ["original"],
        "tags": ["role-playing", "rolebound", suite.name],
    }


def _license(suite, requested: str | None, own_data: bool) -> tuple[str, bool]:
    """(licence id for the card, local-only?). A source without a licence cannot be given one."""
    if suite.hub.license is None:
        if requested and requested.lower() not in NO_CLAIM:
            raise InputError(f"the {suite.name} source states no licence; its export is for local use only "
                             f"and cannot be published under '{requested}'", field="--license")
        return "unknown", True
    if requested:
        return requested, requested.lower() in NO_CLAIM
    return ("unknown", True) if own_data else (suite.hub.license, False)


def _card(suite, header: dict, counts: dict[str, int], local_only: bool, data: list[str]) -> str:
    h = suite.hub
    lines = ["---", yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
             f"# {h.pretty_name}", "",
             f"The `{suite.name}` suite's items as rolebound builds them "
             f"({'from ' + ', '.join(data) if data else 'its starter set'}), one config per "
             f"`{h.config_field}`, one `{SPLIT}` split each.", ""]
    if local_only:
        lines += ["**For local use only.** The source of these items states no licence; do not "
                  "publish this folder.", ""]
    lines += ["| config | items |", "|---|---|"] + [f"| {c} | {n} |" for c, n in counts.items()]
    lines += ["", "## Use", "", "```python", "from datasets import load_dataset",
              f"ds = load_dataset(\"PATH\", \"{next(iter(counts))}\", split=\"{SPLIT}\")", "```", "",
              f"`rolebound run {suite.name} --data hf:PATH` runs the suite on it; "
              f"`inspect eval rolebound/{task_name(suite.name)}` runs it in inspect_ai (rolebound[inspect]).",
              "", "## Citation", "", "```", h.citation, "```", ""]
    return "\n".join(lines)


def task_name(suite_name: str) -> str:
    return suite_name.replace("-", "_")


def export(suite, dataset, out: Path, *, data: str | None, license_id: str | None = None) -> dict[str, Any]:
    """Write the export folder; returns its rolebound.json."""
    pa, pq = _pyarrow()
    if suite.hub is None:
        raise InputError(f"suite {suite.name} has no Hugging Face export")
    if is_export(data):
        raise InputError("already an export; copy the folder instead", field="--data")
    files = [f.strip() for f in str(data).split(",") if f.strip()] if data else []
    license_id, local_only = _license(suite, license_id, bool(files))
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in dataset.items:
        groups.setdefault(_config_of(suite, item), []).append(item.model_dump(mode="json"))
    json_cols = sorted(_json_columns([r for rows in groups.values() for r in rows]))
    out = claim_export(out, files)
    folders = {c: config_folder(out, c, field=suite.hub.config_field) for c in groups}
    out.mkdir(parents=True, exist_ok=True)
    for config, rows in groups.items():
        folders[config].mkdir(exist_ok=True)
        enc = [{k: (json.dumps(v, ensure_ascii=False) if k in json_cols and v is not None else v)
                for k, v in r.items()} for r in rows]
        # temp file and rename: a link left in an earlier export is replaced, never written through
        with atomic_path(folders[config] / f"{SPLIT}-00000-of-00001.parquet") as tmp:
            pq.write_table(pa.Table.from_pylist(enc), str(tmp))
    sources = []
    for f in files:
        (out / "source").mkdir(exist_ok=True)
        dest = inside(out, f"source/{Path(f).name}", field="--data")
        with atomic_path(dest) as tmp:
            shutil.copyfile(f, tmp)
        sources.append(f"source/{dest.name}")
    counts = {c: len(r) for c, r in groups.items()}
    header = card_header(suite, list(groups), len(dataset.items), license_id)
    write_text_atomic(out / "README.md", _card(suite, header, counts, local_only, files))
    tasks = [{"name": task_name(suite.name), "task": f"rolebound/{task_name(suite.name)}",
              "configs": list(groups), "split": SPLIT}]
    write_text_atomic(out / "eval.yaml", yaml.safe_dump({"tasks": tasks}, sort_keys=False))
    meta = {"suite": suite.name, "source": dataset.source, "sources": sources, "configs": counts,
            "json_columns": json_cols, "order": [i.id for i in dataset.items], "hash": dataset.hash,
            "local_only": local_only}
    write_text_atomic(out / META, json.dumps(meta, indent=2, ensure_ascii=False))
    return meta


def claim_export(out: Path, files: list[str]) -> Path:
    """`out` as an export folder: new, empty or an earlier export (store.claim_folder: never a run
    folder, finished or still running, nor a user's folder), not holding one of the --data files."""
    from .store import claim_folder

    out = claim_folder(out, marker=META, what="export")
    meta = out / META
    if meta.exists() or meta.is_symlink():
        try:
            old = json.loads(read_regular(meta).decode("utf-8"))
        except (OSError, ValueError):
            old = None
        if not (isinstance(old, dict) and "configs" in old and "order" in old):
            raise InputError("is not a rolebound export (another program's file of that name); give another --out",
                             file=str(meta))
    real = out.resolve()
    for f in files:
        if real in Path(f).resolve().parents:
            raise InputError(f"holds {f}, an input of this export; give another --out", file=str(out))
    return out


def config_folder(root: Path, config: str, *, field: str, file: Path | None = None) -> Path:
    """root/<config>: a config name comes from the items (or rolebound.json), so it must be one
    plain folder name that stays inside root."""
    if not config or config in (".", "..") or "/" in config or "\\" in config or config.startswith("."):
        raise InputError(f"config {config!r} is not a plain folder name; a config names one folder inside the "
                         "export", file=str(file or root), field=field)
    return inside(root, config, file=file or root, field=field)


def is_export(data: str | None) -> bool:
    return bool(data) and str(data).startswith(PREFIX)


def load(suite, data: str, settings):
    """`--data hf:DIR`: the suite loads the data the export was built from (its context), then its
    items are replaced by the Parquet rows, validated as the suite's own items, in export order."""
    _, pq = _pyarrow()
    root = Path(data[len(PREFIX):])
    if suite.hub is None:
        raise InputError(f"suite {suite.name} has no Hugging Face export to read", field="--data")
    meta_path = root / META
    try:
        meta = json.loads(read_regular(meta_path).decode("utf-8"))     # a FIFO: InputError, not a hang
    except FileNotFoundError:
        raise InputError("not a rolebound export (no rolebound.json)", file=str(root)) from None
    except ValueError as exc:
        raise InputError(f"unreadable ({exc})", file=str(meta_path)) from None
    meta = validate_record(ExportMeta, meta, file=meta_path, line=None).model_dump()
    if meta.get("suite") != suite.name:
        raise InputError(f"an export of suite {meta.get('suite')!r}, not {suite.name}", file=str(meta_path))
    base = ",".join(str(inside(root, s, file=meta_path, field="sources")) for s in meta.get("sources") or []) or None
    built = suite.load(base, settings)
    own = [i.model_dump(mode="json", exclude_none=True) for i in built.items]
    kinds = {}
    for item in built.items:
        kinds.setdefault(_config_of(suite, item), type(item))
    json_cols = set(meta.get("json_columns") or [])
    by_id = {}
    for config in meta.get("configs") or {}:
        for path in sorted(config_folder(root, config, field="configs", file=meta_path).glob(f"{SPLIT}-*.parquet")):
            model = kinds.get(config)
            if model is None:
                raise InputError(f"config {config!r} is not one the suite builds from this data", file=str(path))
            try:
                with open_regular(path) as fh:      # a FIFO: InputError, not a hang
                    rows = pq.read_table(fh).to_pylist()
            except (OSError, ValueError) as exc:      # pyarrow's ArrowInvalid is a ValueError
                raise InputError(f"not a readable Parquet file ({type(exc).__name__})", file=str(path)) from None
            for n, row in enumerate(rows, 1):
                try:
                    row = {k: (json.loads(v) if k in json_cols and isinstance(v, str) else v) for k, v in row.items()}
                    item = model.model_validate(row)
                except Exception as exc:  # noqa: BLE001 - pydantic's error, as one line
                    first = str(exc).splitlines()
                    raise InputError(f"row {n}: {first[1] if len(first) > 1 else first[0]}", file=str(path)) from None
                by_id[item.id] = item
    order = [i for i in meta.get("order") or [] if i in by_id]
    items = [by_id[i] for i in order] + [v for k, v in by_id.items() if k not in set(order)]
    built.items = items
    state = settings.state          # the suite's own list of its items (warm-ups)
    if state.items and all(isinstance(v, tuple(kinds.values())) for v in state.items):
        state.items = [by_id[v.id] for v in state.items if v.id in by_id]
    built.source = PREFIX + str(root)
    # the same items hash the same, whatever the format (Parquet gives every row each column: an
    # absent key comes back None); other items hash apart
    if [i.model_dump(mode="json", exclude_none=True) for i in items] != own:
        built.hash = stable_hash([built.hash, [i.model_dump(mode="json") for i in items]])
    return built


def load_data(suite, data: str | None, settings):
    """suite.load, or the export reader for `hf:DIR`: the one entry point for --data."""
    return load(suite, data, settings) if is_export(data) else suite.load(data, settings)
