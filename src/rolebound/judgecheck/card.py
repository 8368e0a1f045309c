"""The card's line on a judge: its agreement with human labels, when a judge-check run of that
suite and judge exists (under runs/judge-check/, the default --out, or the card's own folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from ..io import read_regular
from .metrics import HUMANS, MEAN
from .report import stat_text
from .run import KIND


def find_run(suite: str, judge: str | None, roots: Sequence[Path]) -> Path | None:
    """The newest finished judge-check run of `suite` with `judge`, if any."""
    if not judge:
        return None
    found = []
    for root in roots:
        for mpath in sorted(Path(root).glob("*/manifest.json")) if Path(root).is_dir() else []:
            try:
                m = json.loads(read_regular(mpath).decode("utf-8"))
            except (OSError, ValueError, InputError):
                continue
            if m.get("kind") == KIND and m.get("suite") == suite and m.get("judge") == judge and m.get("finished") \
                    and (mpath.parent / "metrics.json").is_file():
                found.append((m["finished"], mpath.parent))
    return max(found)[1] if found else None


def _main_stat(block: dict) -> tuple[str, str]:
    return ("spearman", "Spearman rho") if block["scale"] == "ordinal" else ("kappa", "Cohen's kappa")


def agreement_line(metrics: dict[str, Any], run_dir: Path) -> str:
    parts = []
    for score, block in metrics["scores"].items():
        if not block["judged"]:
            continue
        overall = block["groups"].get("all") or {}
        key, name = _main_stat(block)
        who = MEAN if MEAN in overall else next((a for a in block["annotators"] if a in overall), None)
        if who is None:
            continue
        s = f"{score}: {name} {stat_text(overall[who], key)} vs {'the annotators’ mean' if who == MEAN else who}"
        if HUMANS in overall:
            s += f" (human ceiling {stat_text(overall[HUMANS], key)})"
        parts.append(s)
    n = metrics["verdicts"]["read"]
    by = metrics.get("clustered_by") or "reply"
    return (f"Judge checked against human labels ({n} of {metrics['rows']} verdicts read; CIs clustered by {by}; "
            f"{run_dir}): "
            + "; ".join(parts))


def judge_line(suite: str, judge: str | None, roots: Sequence[Path]) -> str | None:
    run_dir = find_run(suite, judge, roots)
    if run_dir is None:
        return None
    try:
        metrics = json.loads(read_regular(run_dir / "metrics.json").decode("utf-8"))
        return agreement_line(metrics, run_dir)
    except (OSError, ValueError, KeyError, TypeError, InputError):
        return None
