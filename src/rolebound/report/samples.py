"""The data behind report.html's sample viewer.

Suites hand the builder their per-sample rows (each may name its record with `_call`); the
builder joins them with the run's records, so a row opens the whole exchange: every message,
the raw reply, the options' log-probabilities, and the judge or segmenter calls of the same item
(same item id, strategy and repeat). Long texts are stored once in a string table, since a run
repeats its system prompts and profiles thousands of times.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Sequence

GENERIC = ("parsed", "gold", "outcome", "reading")
LONG = ("response", "answer", "judge reply")
_MARKER = re.compile(r"(?:Question:|<question>)\s*", re.I)


def reading(rec) -> str | None:
    """The rule that read the answer, when the record carries one (an attribute or meta field)."""
    v = getattr(rec, "reading", None)
    if v is None:
        v = (rec.meta or {}).get("reading")
    return None if v in (None, "") else str(v)


def question_text(rec) -> str:
    """The question the user asked: meta.query/question, else the last user turn's question line
    (never a prefilled assistant turn such as "Answer:")."""
    meta = rec.meta or {}
    for k in ("query", "question"):
        if isinstance(meta.get(k), str) and meta[k].strip():
            return meta[k].strip()
    p = rec.prompt
    if isinstance(p, list):
        users = [m.get("content", "") for m in p if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users else ""
    else:
        text = p if isinstance(p, str) else ""
    found = list(_MARKER.finditer(text))
    if found:
        text = text[found[-1].end():]
    text = text.strip()
    return text.split("\n", 1)[0].replace("<question/>", "").strip()


def outcome(rec) -> str:
    if rec.error:
        return "error"
    if rec.correct is True:
        return "correct"
    if rec.parsed == "invalid":
        return "invalid"
    if rec.correct is False:
        return "wrong"
    return ""


class _Strings:
    def __init__(self):
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: Any) -> int | None:
        if s is None:
            return None
        s = str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


def _compact(rec, strings: _Strings) -> dict:
    p = rec.prompt
    if isinstance(p, list):
        prompt = [[m.get("role", "?"), strings(m.get("content", ""))] if isinstance(m, dict) else ["?", strings(m)]
                  for m in p]
    else:
        prompt = strings(p)
    out = {"id": rec.call_id, "item": rec.item_id, "strategy": rec.strategy, "stage": rec.stage,
           "role": rec.role, "repeat": rec.repeat, "kind": rec.kind, "model": rec.model, "prompt": prompt,
           "response": strings(rec.response), "parsed": rec.parsed, "gold": rec.gold, "correct": rec.correct,
           "error": strings(rec.error), "meta": rec.meta or {}}
    if rec.continuations is not None:
        out["options"] = rec.continuations
        out["logprobs"] = rec.logprobs
    for k in ("finish_reason", "prompt_tokens", "completion_tokens", "latency_s", "cached", "time"):
        v = getattr(rec, k, None)
        if v not in (None, False):
            out[k] = v
    r = reading(rec)
    if r:
        out["reading"] = r
    return out


def payload(columns: Sequence[str], rows: Sequence[dict], filters: Sequence[str], records: Sequence | None) -> dict:
    """Rows for the list (columns fixed up from the records) plus the records they open."""
    columns, filters = list(columns), list(filters)
    recs = list(records or [])
    by_call = {r.call_id: i for i, r in enumerate(recs)}
    joined = [(row, by_call.get(row.get("_call"))) for row in rows]
    out_rows = []
    extra = {k: False for k in GENERIC}
    for row, ri in joined:
        d = {c: row.get(c) for c in columns}
        if ri is not None:
            rec = recs[ri]
            d["question"] = question_text(rec)
            gen = {"parsed": rec.parsed, "gold": rec.gold, "outcome": outcome(rec), "reading": reading(rec)}
            for k, v in gen.items():
                if k not in columns and v not in (None, ""):
                    if k == "parsed" and isinstance(v, str) and v == rec.response:
                        continue         # an open answer: the reply itself, already in the list
                    extra[k] = True
                d.setdefault(k, v)
            d["_r"] = ri
        out_rows.append(d)
    linked = any(ri is not None for _, ri in joined)
    if linked:                           # the question leads the list
        q = next((c for c in ("question", "query") if c in columns), "question")
        columns = [q] + [c for c in columns if c != q]
    added = [k for k in GENERIC if extra[k]]
    if added:
        at = next((i for i, c in enumerate(columns) if c in LONG), len(columns))
        columns[at:at] = added
        if "outcome" in added and "outcome" not in filters:
            filters.append("outcome")
    for d in out_rows:
        for k in list(d):
            if k not in columns and k != "_r":
                del d[k]
    strings = _Strings()
    return {"columns": columns, "filters": filters, "rows": out_rows,
            "records": [_compact(r, strings) for r in recs] if linked else [],
            "strings": strings.items}


def script_json(obj: Any) -> str:
    """JSON that stays inert inside <script type="application/json">: no markup characters at all
    (so no `</script>`, `<!--` or entity can end or change the block)."""
    data = json.dumps(_finite(obj), ensure_ascii=False, default=str, allow_nan=False)
    return (data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _finite(x: Any) -> Any:
    """NaN and infinities (a -inf log-prob) as null: JSON.parse rejects them."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
