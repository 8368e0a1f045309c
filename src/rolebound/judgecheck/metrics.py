"""PURE: a judge-check run's records -> agreement of the judge with each annotator, with their
mean, and of the annotators with each other (the human ceiling), per score and per group.

Each verdict record carries the row's human labels and group in `meta` (run.py), so the metrics
need nothing but records.jsonl. Rows are sorted by item id before any resampling: the same
records in any order give the same figures.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable

from ..records import INVALID
from ..metrics.agreement import BOOTSTRAP, SEED, agreement
from .spec import JudgeCheck, Scale

ALL = "all"
MEAN = "mean"
HUMANS = "humans"      # the annotators with each other: the human ceiling


def verdict_rows(records: Iterable, check: JudgeCheck) -> list[dict[str, Any]]:
    """One row per labelled reply: its judge verdict ({} when unread or failed), labels, group."""
    out = {}
    for r in records:
        if r.role != "judge" or "labels" not in (r.meta or {}):
            continue
        if r.stage != "judge" and (r.item_id in out or r.error is None):
            continue       # an earlier step (judge.think): counts only when it failed, ending the row
        scores = check.scores_of(r.parsed) if r.error is None and r.parsed != INVALID else None
        out[r.item_id] = {"id": r.item_id, "group": r.meta.get("group") or "", "labels": r.meta["labels"],
                          "judge": scores or {}, "failed": r.error is not None,
                          "unread": r.error is None and not scores}
    return [out[k] for k in sorted(out)]


def _mean(labels: dict[str, dict], score: str, annotators: list[str]) -> float | None:
    vals = [labels.get(a, {}).get(score) for a in annotators]
    if not annotators or any(v is None for v in vals):
        return None
    return sum(float(v) for v in vals) / len(vals)


def _pairs(rows, scale: Scale, left, right) -> tuple[list[int], list[int]]:
    a, b = [], []
    for row in rows:
        i, j = scale.index(left(row)), scale.index(right(row))
        if i is not None and j is not None:
            a.append(i)
            b.append(j)
    return a, b


def _targets(score: str, annotators: list[str], judged: bool, nominal: bool) -> dict[str, tuple]:
    """name -> (left, right) value getters of one comparison."""
    def lab(a):
        return lambda row: row["labels"].get(a, {}).get(score)

    def jud(row):
        return row["judge"].get(score)

    out: dict[str, tuple] = {}
    if judged:
        out.update({a: (jud, lab(a)) for a in annotators})
        if len(annotators) > 1 and not nominal:
            out[MEAN] = (jud, lambda row: _mean(row["labels"], score, annotators))
    for x, y in combinations(annotators, 2):
        out[HUMANS if len(annotators) == 2 else f"{x} vs {y}"] = (lab(x), lab(y))
    return out


def score_block(rows, score: str, scale: Scale, judged: bool, resamples: int, seed: int) -> dict[str, Any]:
    annotators = sorted({a for row in rows for a, labs in row["labels"].items() if labs.get(score) is not None})
    groups = [ALL] + sorted({row["group"] for row in rows if row["group"]})
    grid = scale.grid()
    kind = scale.kind
    out: dict[str, Any] = {"scale": kind, "points": list(scale.points), "judged": judged,
                           "annotators": annotators, "groups": {}}
    for g in groups:
        sub = [row for row in rows if g == ALL or row["group"] == g]
        block = {}
        for name, (left, right) in _targets(score, annotators, judged, kind == "nominal").items():
            a, b = _pairs(sub, scale, left, right)
            stats = agreement(a, b, grid, kind, resamples=resamples, seed=seed)
            if name == MEAN:
                stats.pop("exact", None)     # half points: exact agreement with a mean is not defined
            block[name] = stats
        out["groups"][g] = block
    return out


def compute(records, check: JudgeCheck, *, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    rows = verdict_rows(records, check)
    judged = set(check.judged_scales())
    scores = {s: score_block(rows, s, scale, s in judged, resamples, seed) for s, scale in check.scales.items()}
    return {"kind": "judge-check", "rows": len(rows),
            "verdicts": {"read": sum(1 for r in rows if r["judge"]), "unread": sum(1 for r in rows if r["unread"]),
                         "failed": sum(1 for r in rows if r["failed"])},
            "judged": sorted(judged), "bootstrap": {"resamples": resamples, "seed": seed, "ci": 95},
            "scores": scores}


def humans_only(rows, check: JudgeCheck, *, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """The annotators' agreement with each other on labelled rows (no judge): the human ceiling of
    a whole release, e.g. every Beyond One World reply."""
    table = [{"id": r.id, "group": r.group or "", "labels": r.labels, "judge": {}}
             for r in sorted(rows, key=lambda r: r.id)]
    return {"kind": "judge-check-humans", "rows": len(table), "bootstrap": {"resamples": resamples, "seed": seed},
            "scores": {s: score_block(table, s, scale, False, resamples, seed) for s, scale in check.scales.items()}}
