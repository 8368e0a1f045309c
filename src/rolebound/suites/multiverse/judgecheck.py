"""`rolebound judge-check multiverse`: the suite's 0-5 thinking/acting judge on Beyond One World's
human-labelled replies.

The release's annotated_results/ (SOURCE.md) holds, for five models, 624 replies each scored by two
annotators (anno1/, anno2/merge_<model>.jsonl): thinking_score and acting_score (0-5) on canon,
dilemma and quote replies, describe_score on the 56 knowledge replies. What the import does:
- pairs the two annotators' rows on (task, CID, question, reply) with case, punctuation and
  whitespace folded (the r1 files list the rows in another order, and anno2 writes a missing
  question as NaN where anno1 writes null); every row pairs;
- a score is a label when it is a number 0-5 (null, NaN and "" are no label);
- the judge reads the reply as the authors' scoring.py does (the raw reply, no segmenter) with the
  character's name and lore. The annotated rows carry pdb ids, not the benchmark's CIDs, so their
  attributes are unknown: the prompt says "Attributes: -" (docs/judge-check.md);
- describe has no judge counterpart in the suite: only the humans' agreement on it is reported;
- a reply's cluster is its task and CID: one character's questions of one task (up to six canon
  questions), so the five models' replies to a question are resampled together, with that
  character's other questions of the task (the suite clusters canon questions by hero too).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ...errors import InputError
from ...io import check_file
from ...judgecheck.spec import JudgeCheck, Labelled, Scale
from ...store import shared_root
from .data import Attributes
from .importers import parse_source

MODELS = ("claude", "gemini2", "gemini2_thinking", "r1", "v3")   # r1_old (anno2 only) repeats r1
ANNOTATORS = ("anno1", "anno2")
SCORES = {"thinking": "thinking_score", "acting": "acting_score", "describe": "describe_score"}
RELEASE = "data/external/Beyond_One_World/annotated_results"
NOTE = ("Beyond One World annotated_results (github.com/Augustus2011/Beyond_One_World @1e29f9e), "
        "imported as published")


class Context(BaseModel):
    """What the judge prompt reads besides the reply."""

    model_config = ConfigDict(extra="allow")
    character: str = Field(min_length=1)
    lore: str = Field(min_length=1)
    attributes: Attributes | None = None       # age, power, race, mbti, enneagram (as the suite's versions)


SCALE = Scale("ordinal", (0, 1, 2, 3, 4, 5))


def default_release() -> Path | None:
    root = shared_root()
    path = root / RELEASE if root else None
    return path if path is not None and path.is_dir() else None


def _fold(text: Any) -> str:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    return " ".join(re.sub(r"[^\w]+", " ", str(text)).lower().split())


def _score(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if not math.isnan(x) and 0 <= x <= 5 else None


def _rows(path: Path) -> list[tuple[int, dict]]:
    out = []
    try:
        with (check_file(path) if path.exists() else path).open(encoding="utf-8") as fh:    # a FIFO: one line
            for n, line in enumerate(fh, 1):
                if line.strip():
                    out.append((n, json.loads(line)))    # the release writes NaN: json reads it
    except FileNotFoundError:
        raise InputError("file not found (expected the release's anno1/ and anno2/ folders)", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=n) from None
    return out


def _key(row: dict) -> tuple:
    kind = str(row.get("source_file") or "").split("_")[0]
    return kind, row.get("CID"), _fold(row.get("question")), _fold(row.get("answers"))


def read_release(folder: Path) -> list[Labelled]:
    """Every model's replies with both annotators' scores, as Labelled rows (sorted by id)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder (expected Beyond One World's annotated_results/)", file=str(folder))
    out: list[Labelled] = []
    for model in MODELS:
        by_anno = {a: {_key(r): (n, r) for n, r in _rows(folder / a / f"merge_{model}.jsonl")} for a in ANNOTATORS}
        first = by_anno[ANNOTATORS[0]]
        for key, (line, row) in first.items():
            labels = {}
            for a in ANNOTATORS:
                other = by_anno[a].get(key)
                if other is not None:
                    labels[a] = {s: _score(other[1].get(col)) for s, col in SCORES.items()}
            lore = parse_source(row.get("lore") or "")[0]
            rid = hashlib.sha256(json.dumps([model, *key], ensure_ascii=False).encode()).hexdigest()[:12]
            out.append(Labelled(
                id=f"{model}-{key[0]}-{rid}", reply=str(row.get("answers") or ""), labels=labels, group=model,
                context={"character": " ".join(str(row.get("name") or "").split()),
                         "lore": ", ".join(lore) or "-", "task": key[0], "cid": row.get("CID")},
                source=f"{NOTE}: {model}, line {line}", note="human scores of two annotators"))
    return sorted((r for r in out if r.reply.strip()), key=lambda r: r.id)


async def judge(ctx, row: Labelled, settings: dict[str, Any]):
    from types import SimpleNamespace

    from .strategies import judge_reply

    c = Context.model_validate(row.context)
    # the judge prompt of a run, filled from the row: lore as the universe, no separate work
    ver = SimpleNamespace(name=c.character, universe=c.lore, work=None, attributes=c.attributes or Attributes())
    return await judge_reply(ctx, ver, row.reply, {"judge_input": "raw"}, settings["judge_scoring"] == "logprob",
                             settings.get("judge_max_tokens"))


def run_settings(scoring_mode: Callable[[Any], str]) -> Callable[[Any, Any], dict[str, Any]]:
    """The suite's own rules: the 0-5 pair read by log-likelihood on the demo models (which write
    no score format), generated elsewhere (scoring_mode(judge)); the demo judge's short cap, else
    the judge decoding's."""
    from .strategies import SMALL_LIMITS

    def settings(judge_backend, resolved) -> dict[str, Any]:
        cap = SMALL_LIMITS["judge_max_tokens"] if resolved.mode == "demo" else None
        return {"judge_scoring": scoring_mode(judge_backend), "judge_max_tokens": cap, "judge_input": "raw"}

    return settings


def has_labels(row: Labelled) -> bool:
    return any(v is not None for lab in row.labels.values() for k, v in lab.items() if k in ("thinking", "acting"))


def select(rows: list[Labelled], limit: int | None) -> list[Labelled]:
    """Replies the judge can be checked on (a thinking or acting label), round-robin over the
    models and, within a model, over the tasks, so a small --limit covers all five."""
    from ..base import interleave

    rows = [r for r in rows if has_labels(r)]
    if not limit or limit >= len(rows):
        return rows
    per: dict[str, dict[str, list]] = {}
    for r in rows:
        per.setdefault(r.group or "", {}).setdefault(str(r.context.get("task")), []).append(r)
    queues = [interleave([per[g][t] for t in sorted(per[g])]) for g in sorted(per)]
    return interleave(queues)[:limit]


CLUSTER_BY = "task and character (the release's CID)"      # the five models' replies to its questions


def cluster_of(row: Labelled) -> str | None:
    """A release row's cluster (task/cid=N); a user's row without them: none (the reply alone)."""
    task, cid = row.context.get("task"), row.context.get("cid")
    return f"{task}/cid={cid}" if task is not None and cid is not None else None


def departures(rows: list[Labelled]) -> list[str]:
    out = ["the judge reads the whole reply (the authors' scoring.py), not the segmented spans"]
    bare = sum(1 for r in rows if not r.context.get("attributes"))
    if bare:
        out.append(f"{bare} of {len(rows)} replies judged without the character's attributes")
    return out


def spec(scoring_mode: Callable[[Any], str]) -> JudgeCheck:
    from .prompts import JUDGE

    return JudgeCheck(scales={"thinking": SCALE, "acting": SCALE, "describe": SCALE}, judge=judge,
                      context_model=Context, prompt_templates={"judge": JUDGE}, release=read_release,
                      default_release=default_release, judged=("thinking", "acting"), select=select,
                      settings=run_settings(scoring_mode),
                      departures=departures, cluster_of=cluster_of, cluster_by=CLUSTER_BY)
