"""`rolebound import inspect LOG --out DIR`: an inspect eval log of a rolebound task as a run folder
(manifest.json, records.jsonl), then its metrics and report, so `rolebound report`, `compare` and
`card --runs` read it like any run."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InputError
from ..io import check_file, validate_record
from ..records import Decoding, Record, RunManifest, loc_text
from ..store import MANIFEST, RECORDS, RunDir, claim_folder
from . import GRADER

SCORER = "rolebound_score"
# What a .eval (a zip) may inflate to: all members together, and one member past its ratio
MAX_INFLATED = 1 << 30
MAX_RATIO, RATIO_FROM = 100, 32 << 20


def check_inflated(path: Path) -> None:
    """Refuse a .eval whose members would inflate past the bounds, before inspect reads them
    (zipfile stops at a member's declared size, so the declared sizes bound what is read)."""
    try:
        if not zipfile.is_zipfile(path):
            return          # a .json log: its size on disk is what is read
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return              # inspect's reader says what is wrong with it
    total = sum(i.file_size for i in infos)
    if total > MAX_INFLATED:
        raise InputError(f"inflates to {total / 2**20:,.0f} MiB, over the {MAX_INFLATED >> 20:,} MiB an eval log "
                         "may hold (a zip bomb?)", file=str(path))
    for i in infos:
        if i.file_size > RATIO_FROM and i.file_size > MAX_RATIO * max(1, i.compress_size):
            raise InputError(f"{i.filename} inflates {i.file_size / max(1, i.compress_size):,.0f} times, to "
                             f"{i.file_size / 2**20:,.0f} MiB (a zip bomb?)", file=str(path))


class LogMeta(BaseModel):
    """The `rolebound` metadata a task writes into its log (inspect/tasks.py), read back."""

    model_config = ConfigDict(extra="ignore")
    suite: str
    strategies: list[str]
    dataset: str
    dataset_hash: str
    decoding: Decoding
    judge_decoding: Decoding | None = None
    uses_judge: bool = False
    scoring: str | None = None
    limit: int | None = None
    options: dict[str, Any] | None = None
    prompt_templates: dict[str, str] | None = None
    package_version: str = "?"
    # the task's items and the dataset's (tasks.py): a log of the first samples is no whole run
    asked_items: int | None = Field(None, ge=0)
    dataset_items: int | None = Field(None, ge=0)


def _known_suite(name: str, path: Path) -> None:
    """An unknown suite is refused before anything is written, naming the log's field."""
    from ..suites import get_suite

    try:
        get_suite(name)
    except InputError as exc:
        raise InputError(exc.detail, file=str(path), field="eval.metadata.rolebound.suite") from None


def import_log(log_path: str | Path, out: str | Path) -> tuple[RunManifest, int]:
    """Write the run folder; returns its manifest and how many samples had no score (errors)."""
    # a missing log or a taken --out is refused before inspect_ai loads (a second of imports)
    path = check_file(log_path)         # a FIFO or a device: one line, never a hang
    rd = RunDir(claim_folder(out, marker=MANIFEST))     # new or empty: nobody's files are replaced
    if rd.exists():
        raise InputError("already holds a run; choose another --out", file=str(rd.path))
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError("reading inspect logs needs rolebound[inspect] (pip install 'rolebound[inspect]')") from None
    check_inflated(path)
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - inspect's reader raises many kinds
        raise InputError(f"not a readable inspect eval log ({type(exc).__name__})", file=str(path)) from None
    meta = (log.eval.metadata or {}).get("rolebound")
    if not meta:
        raise InputError("not a log of a rolebound task (no rolebound metadata)", file=str(path))
    # a hand-edited log is input like any other: each field checked, named where it fails
    meta = validate_record(LogMeta, meta, file=path, line=None, loc_prefix=("eval", "metadata", "rolebound"))
    _known_suite(meta.suite, path)
    records, failed, items = [], 0, set()
    for i, s in enumerate(log.samples or []):
        score = (s.scores or {}).get(SCORER)
        if score is None or not isinstance(score.metadata, dict) or "records" not in score.metadata:
            failed += 1
            continue
        items.add((s.metadata or {}).get("item_id"))
        where = ("samples", i, "scores", SCORER, "metadata", "records")
        objs = score.metadata["records"]
        if not isinstance(objs, list):
            raise InputError(f"expected a list of records, got {type(objs).__name__}", file=str(path),
                             field=loc_text(where))
        for j, obj in enumerate(objs):
            rec = validate_record(Record, obj, file=path, line=None, loc_prefix=(*where, j))
            if rec.suite != meta.suite:      # the log's suite edited over another suite's records
                raise InputError(f"sample {s.id!r} holds a record of suite '{rec.suite}' in a log of suite "
                                 f"'{meta.suite}'", file=str(path), field="eval.metadata.rolebound.suite")
            if s.epoch > 1:      # inspect's epochs are rolebound's repeats
                rec.repeat = s.epoch - 1
                rec.call_id += f"#{rec.repeat}"
            records.append(rec)
    model = f"inspect:{log.eval.model}"
    roles = log.eval.model_roles or {}
    judge = None
    if meta.uses_judge:
        judge = f"inspect:{roles[GRADER].model}" if GRADER in roles else model
    stats = log.stats
    decoding = meta.decoding
    given = log.plan.config if log.plan else None       # the eval's --temperature, --max-tokens, ...
    if given is not None:
        decoding = decoding.merged(temperature=given.temperature, top_p=given.top_p,
                                   max_tokens=given.max_tokens, seed=given.seed)
    manifest = RunManifest(
        suite=meta.suite, strategies=meta.strategies, model=model, backend="inspect", judge=judge,
        scoring=meta.scoring, decoding=decoding,
        judge_decoding=meta.judge_decoding if judge else None,
        # the task's items and inspect's own --limit: a log of its first samples is no whole run
        protocol={"mode": "inspect", "log": str(path), "self_judged": bool(judge) and judge == model,
                  "task_items": meta.asked_items, "dataset_items": meta.dataset_items,
                  "sample_limit": log.eval.config.limit},
        dataset=meta.dataset, dataset_hash=meta.dataset_hash, n_items=len(items),
        limit=meta.limit,
        repeats=log.eval.config.epochs or 1, options=meta.options or {},
        prompt_templates=meta.prompt_templates or {}, package_version=meta.package_version,
        started=stats.started_at or None, finished=stats.completed_at or None,
        # the report's calls line: inspect made every call (no cache, no resume here)
        counts={"calls": len(records), "items_failed": failed,
                "model_calls": sum(1 for r in records if not r.cached),
                "cache_hits": sum(1 for r in records if r.cached), "resumed": 0,
                "failed_calls": sum(1 for r in records if r.error)})
    rd.write_manifest(manifest)
    rd.write_text(RECORDS, "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False) + "\n"
                                   for r in records))
    return manifest, failed
