"""`rolebound import inspect LOG --out DIR`: an inspect eval log of a rolebound task as a run folder
(manifest.json, records.jsonl), then its metrics and report, so `rolebound report`, `compare` and
`card --runs` read it like any run."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from ..records import Decoding, Record, RunManifest
from ..store import RECORDS, RunDir
from . import GRADER

SCORER = "rolebound_score"


def import_log(log_path: str | Path, out: str | Path) -> tuple[RunManifest, int]:
    """Write the run folder; returns its manifest and how many samples had no score (errors)."""
    # a missing log or a taken --out is refused before inspect_ai loads (a second of imports)
    path = Path(log_path)
    if not path.is_file():
        raise InputError("no such eval log", file=str(path))
    rd = RunDir(out)
    if rd.exists():
        raise InputError("already holds a run; choose another --out", file=str(rd.path))
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError("reading inspect logs needs rolebound[inspect] (pip install 'rolebound[inspect]')") from None
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - inspect's reader raises many kinds
        raise InputError(f"not a readable inspect eval log ({type(exc).__name__})", file=str(path)) from None
    meta = (log.eval.metadata or {}).get("rolebound")
    if not meta:
        raise InputError("not a log of a rolebound task (no rolebound metadata)", file=str(path))
    records, failed, items = [], 0, set()
    for s in log.samples or []:
        score = (s.scores or {}).get(SCORER)
        if score is None or not isinstance(score.metadata, dict) or "records" not in score.metadata:
            failed += 1
            continue
        items.add((s.metadata or {}).get("item_id"))
        for obj in score.metadata["records"]:
            rec = Record.model_validate(obj)
            if s.epoch > 1:      # inspect's epochs are rolebound's repeats
                rec.repeat = s.epoch - 1
                rec.call_id += f"#{rec.repeat}"
            records.append(rec)
    model = f"inspect:{log.eval.model}"
    roles = log.eval.model_roles or {}
    judge = None
    if meta.get("uses_judge"):
        judge = f"inspect:{roles[GRADER].model}" if GRADER in roles else model
    stats = log.stats
    decoding = Decoding(**meta["decoding"])
    given = log.plan.config if log.plan else None       # the eval's --temperature, --max-tokens, ...
    if given is not None:
        decoding = decoding.merged(temperature=given.temperature, top_p=given.top_p,
                                   max_tokens=given.max_tokens, seed=given.seed)
    manifest = RunManifest(
        suite=meta["suite"], strategies=meta["strategies"], model=model, backend="inspect", judge=judge,
        scoring=meta.get("scoring"), decoding=decoding,
        judge_decoding=Decoding(**meta["judge_decoding"]) if meta.get("judge_decoding") and judge else None,
        # the task's items and inspect's own --limit: a log of its first samples is no whole run
        protocol={"mode": "inspect", "log": str(path), "self_judged": bool(judge) and judge == model,
                  "task_items": meta.get("asked_items"), "dataset_items": meta.get("dataset_items"),
                  "sample_limit": log.eval.config.limit},
        dataset=meta["dataset"], dataset_hash=meta["dataset_hash"], n_items=len(items),
        limit=meta.get("limit"),
        repeats=log.eval.config.epochs or 1, options=meta.get("options") or {},
        prompt_templates=meta.get("prompt_templates") or {}, package_version=meta.get("package_version", "?"),
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
