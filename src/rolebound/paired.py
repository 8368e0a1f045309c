"""Two runs of one dataset as what they are, paired samples (issue 51): what differs between them
(protocol, decoding, scoring, prompts), then B - A for each stage's accuracy on the calls both
hold, matched by item, strategy, stage and repeat, with a paired cluster-bootstrap CI and
McNemar's exact p. Used by `rolebound compare` and `rolebound card --compare`. Pure: records and
manifests in, numbers and lines out (compare.py formats and writes them)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .errors import InputError
from .stats import cluster_key, paired_diff

# manifest fields whose difference changes what a figure means: named before any number
_FIELDS = ("model", "backend", "judge", "extractor", "scoring", "repeats", "limit", "strategies", "options")


def check_same_data(a, b, name_a: str, name_b: str) -> None:
    """Runs over different data cannot be paired: one line (InputError, exit 2)."""
    if a.dataset_hash != b.dataset_hash:
        raise InputError(f"{name_b} ran on other data than {name_a} (dataset hash {b.dataset_hash} vs "
                         f"{a.dataset_hash}): runs are compared only on the same data", field="RUN_DIRS")


def differences(a, b) -> list[str]:
    """Every difference between two manifests in protocol, decoding, scoring, prompt hashes (and
    model, judge, options, subset), one line each: 'decoding.temperature: 0.0 (A) vs 0.7 (B)'."""
    out = []

    def one(name: str, x: Any, y: Any) -> None:
        if x != y:
            out.append(f"{name}: {_shown(x)} (A) vs {_shown(y)} (B)")

    proto_a, proto_b = a.protocol or {}, b.protocol or {}
    for k in sorted(set(proto_a) | set(proto_b)):
        one(f"protocol.{k}", proto_a.get(k), proto_b.get(k))
    for prefix, da, db in (("decoding", a.decoding, b.decoding), ("judge decoding", a.judge_decoding, b.judge_decoding)):
        xa, xb = (da.model_dump() if da is not None else {}), (db.model_dump() if db is not None else {})
        for k in sorted(set(xa) | set(xb)):
            one(f"{prefix}.{k}", xa.get(k), xb.get(k))
    for f in _FIELDS:
        one(f, getattr(a, f, None), getattr(b, f, None))
    pa, pb = a.prompt_templates or {}, b.prompt_templates or {}
    for k in sorted(set(pa) | set(pb)):
        one(f"prompt hash {k}", pa.get(k), pb.get(k))
    return out


def _shown(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in sorted(v.items())) or "none"
    return str(v)


def outcomes(records) -> dict[tuple[str, str], dict[tuple[str, int], Any]]:
    """(strategy, stage) -> {(call_id, repeat): record} of the model's right/wrong answers."""
    out: dict[tuple[str, str], dict[tuple[str, int], Any]] = defaultdict(dict)
    for r in records:
        if r.role == "model" and r.error is None and r.correct is not None:
            out[(r.strategy, r.stage)][(r.call_id, r.repeat)] = r
    return dict(sorted(out.items()))


def paired_rows(recs_a, recs_b, clusters: dict | None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """B - A per (strategy, stage) on the calls both runs hold; clusters from A's records under
    the suite's declaration. Also how many calls only one run holds, over all stages."""
    oa, ob = outcomes(recs_a), outcomes(recs_b)
    rows, only = [], {"a": 0, "b": 0}
    for key in sorted(set(oa) | set(ob)):
        ra, rb = oa.get(key, {}), ob.get(key, {})
        d = paired_diff({k: bool(r.correct) for k, r in ra.items()}, {k: bool(r.correct) for k, r in rb.items()},
                        {k: cluster_key(r, clusters) for k, r in ra.items()})
        only["a"] += d["only_a"]
        only["b"] += d["only_b"]
        rows.append({"strategy": key[0], "stage": key[1], **d})
    return rows, only


def compare_pair(suite, run_a, run_b) -> dict[str, Any]:
    """run_x: (folder, manifest, records). Refuses other data; else the differences and the rows."""
    (da, ma, ra), (db, mb, rb) = run_a, run_b
    check_same_data(ma, mb, str(da), str(db))
    rows, only = paired_rows(ra, rb, suite.clusters)
    return {"a": str(da), "b": str(db), "differences": differences(ma, mb), "rows": rows, "only": only}


def lines(pair: dict[str, Any]) -> list[str]:
    """What is said before the numbers: the runs, what differs, the calls only one run holds."""
    out = [f"A: {pair['a']}", f"B: {pair['b']}"]
    out += [f"differs: {d}" for d in pair["differences"]] or ["no difference in protocol, decoding, scoring or "
                                                              "prompt hashes"]
    oa, ob = pair["only"]["a"], pair["only"]["b"]
    out.append(f"only one run holds {oa + ob} answered calls ({oa} only A, {ob} only B): left out of the differences"
               if oa + ob else "both runs hold the same answered calls")
    return out
