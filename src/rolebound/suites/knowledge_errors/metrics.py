"""Metrics of the knowledge-errors suite. Pure functions of records (and, for the hidden-state
analysis, of the saved vectors).

Accuracy (paper §6.1): the share of final answers the judge marks "yes" (KKE: the error was
found and corrected; UKE: the character showed confusion or curiosity about what it cannot know).
An unparseable judgment is "invalid": it counts as not detected and is reported on its own (only
generated judgments can be invalid; with judge_scoring=logprob the verdict is the likelier of
" yes" and " no"). An answer without a judgment of the round in use (its judge call failed) is
left out and counted.
Each repeat gives one accuracy per cell; tables show mean +- SEM over repeats (Tables 2 and 3).
"Average" is the accuracy over all items of an error type (the paper's averages are weighted by
category size), and the overall average is over all items.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ...records import INVALID
from ...stats import bootstrap_ci, cluster_key, mean_sem, paired_diff, rate, uncertainty
from ...rejudge import judge_modes, judge_rounds, newest_round, verdicts
from ...rejudge import judge_stage as core_judge_stage
from .prompts import JUDGE_STAGE

CATEGORIES = ("event", "relational", "attitudinal", "identity")
ERROR_TYPES = ("KKE", "UKE")
ANSWER_STAGE = "answer"

def judge_stage(round_: int) -> str:
    return core_judge_stage(JUDGE_STAGE, round_)


def _is_item(r) -> bool:
    return r.meta.get("error_type") in ERROR_TYPES and r.meta.get("category") in CATEGORIES


def outcomes(records: list, round_: int | None = None, clusters: dict | None = None) -> tuple[int | None, list[dict]]:
    """One row per final answer: strategy, repeat, item, grouping fields, the judgment and the
    answer's cluster under the suite's declaration (`clusters`; None: the item)."""
    if round_ is None:
        round_ = newest_round(records)
    verdict: dict[tuple, Any] = {}
    for r in verdicts(records, round_):
        if r.error is None:
            verdict[(r.item_id, r.strategy, r.repeat)] = r.parsed
    rows = []
    for r in records:
        if r.stage != ANSWER_STAGE or r.role != "model" or r.error is not None or not _is_item(r):
            continue
        j = verdict.get((r.item_id, r.strategy, r.repeat))
        rows.append({"item_id": r.item_id, "strategy": r.strategy, "repeat": r.repeat,
                     "character": r.meta.get("character"), "category": r.meta["category"],
                     "error_type": r.meta["error_type"], "judgment": j, "cluster": cluster_key(r, clusters)})
    return round_, rows


def _cell(rows: list[dict], repeats: list[int]) -> dict:
    """mean +- SEM over repeats of the detection rate (percent) of the judged rows."""
    per = []
    n = 0
    for rep in repeats:
        judged = [x for x in rows if x["repeat"] == rep and x["judgment"] is not None]
        if judged:
            per.append(100.0 * sum(x["judgment"] == "yes" for x in judged) / len(judged))
            n = max(n, len(judged))
    m, s = mean_sem(per)
    # 95% bootstrap CI over the judged answers of every repeat pooled (the paper gives SEM over
    # repeats only; one repeat has none, and the CI says how much the item sample can move)
    # resampling the clusters the suite declares (a KKE/UKE pair's shared memory; repeats share it)
    judged = [x for x in rows if x["judgment"] is not None]
    yes, cl = [x["judgment"] == "yes" for x in judged], [x.get("cluster") or x["item_id"] for x in judged]
    lo, hi = bootstrap_ci(yes, clusters=cl)
    out = {"mean": m, "sem": s, "n": n, "per_repeat": per, "lo": lo, "hi": hi}
    if judged:      # the pooled rate and its clusters: what the headline table reads
        out.update({"rate": rate(yes), "n_judged": len(judged), **uncertainty(yes, cl)})
    return out


def accuracy_table(rows: list[dict], strategies: list[str]) -> dict[str, dict]:
    """strategy -> {KKE: {category: cell, all: cell}, UKE: {...}, overall: cell, judgments: counts}."""
    out: dict[str, dict] = {}
    for strat in strategies:
        srows = [x for x in rows if x["strategy"] == strat]
        repeats = sorted({x["repeat"] for x in srows})
        res: dict[str, Any] = {}
        for et in ERROR_TYPES:
            erows = [x for x in srows if x["error_type"] == et]
            res[et] = {c: _cell([x for x in erows if x["category"] == c], repeats) for c in CATEGORIES}
            res[et]["all"] = _cell(erows, repeats)
        res["overall"] = _cell(srows, repeats)
        res["judgments"] = {
            "answers": len(srows),
            "yes": sum(x["judgment"] == "yes" for x in srows),
            "no": sum(x["judgment"] == "no" for x in srows),
            "invalid": sum(x["judgment"] == INVALID for x in srows),
            "unjudged": sum(x["judgment"] is None for x in srows)}
        chars: dict[str, dict] = {}
        for ch in sorted({x["character"] for x in srows}):
            crows = [x for x in srows if x["character"] == ch]
            chars[ch] = {et: _cell([x for x in crows if x["error_type"] == et], repeats) for et in ERROR_TYPES}
        res["by_character"] = chars
        res["repeats"] = repeats
        out[strat] = res
    return out


def cost_table(records: list, strategies: list[str]) -> dict[str, dict]:
    """Model calls and tokens per item and repeat, by strategy (shared calls such as the S2RD
    self-narrative are included once, so they are spread over the items)."""
    out = {}
    for strat in strategies:
        srecs = [r for r in records if r.strategy == strat and r.error is None]
        jobs = {(r.item_id, r.repeat) for r in srecs if r.stage == ANSWER_STAGE and _is_item(r)}
        n = len(jobs)
        if not n:
            out[strat] = {"items": 0}
            continue
        model = [r for r in srecs if r.role == "model"]
        judge = [r for r in srecs if r.role == "judge" and r.stage == judge_stage(0)]
        out[strat] = {
            "items": n,
            "model_calls": len(model) / n,
            "prompt_tokens": sum(r.prompt_tokens or 0 for r in model) / n,
            "completion_tokens": sum(r.completion_tokens or 0 for r in model) / n,
            "judge_calls": len(judge) / n,
            "judge_tokens": sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in judge) / n,
        }
    return out


def s2rd_notes(records: list, strategies: list[str]) -> dict[str, dict]:
    """How often the recollection step gave fewer than m memories (weak models)."""
    out = {}
    for strat in strategies:
        recs = [r for r in records if r.strategy == strat and r.stage == ANSWER_STAGE and r.error is None
                and "recollected" in r.meta]
        if recs:
            counts = [int(r.meta["recollected"]) for r in recs]
            out[strat] = {"recollections": len(recs), "mean_memories": sum(counts) / len(counts),
                          "fallback_to_query": sum(1 for c in counts if c == 0)}
    return out


def vs_vanilla(rows: list[dict], strategies: list[str]) -> dict[str, dict]:
    """Each method against vanilla on the same judged answers (item, repeat): the paired
    difference in detection rate per error type and overall, its CI resampling clusters."""
    def yes(strat, keep):
        return {(x["item_id"], x["repeat"]): x["judgment"] == "yes" for x in rows
                if x["strategy"] == strat and x["judgment"] is not None and keep(x)}

    if "vanilla" not in strategies:
        return {}
    cl = {(x["item_id"], x["repeat"]): x.get("cluster") or x["item_id"] for x in rows}
    keeps = {"KKE": lambda x: x["error_type"] == "KKE", "UKE": lambda x: x["error_type"] == "UKE",
             "overall": lambda x: True}
    return {s: {k: paired_diff(yes("vanilla", keep), yes(s, keep), cl) for k, keep in keeps.items()}
            for s in strategies if s != "vanilla"}


def compute(records: list, strategies: list[str], round_: int | None = None,
            clusters: dict | None = None) -> dict[str, Any]:
    """Every figure; `clusters`: the suite's declaration (KnowledgeErrorsSuite.clusters)."""
    round_, rows = outcomes(records, round_, clusters)
    rounds = judge_rounds(records)
    return {
        "vs_vanilla": vs_vanilla(rows, strategies),
        "judge_round": round_,
        "judges": {str(k): v for k, v in rounds.items()},
        "judge_scoring": {str(k): v for k, v in judge_modes(records).items()},
        "accuracy": accuracy_table(rows, strategies),
        "cost": cost_table(records, strategies),
        "s2rd": s2rd_notes(records, strategies),
        "failed_calls": sum(1 for r in records if r.error),
    }


# -- hidden states (paper §6.3, Figure 4) --------------------------------------------------------
def cosine_distances(vectors: np.ndarray, memory_ids: list[str], kinds: list[str],
                     characters: list[str]) -> dict[str, dict]:
    """Mean cosine distance correct-vs-KKE and correct-vs-UKE over memories, per character and all."""
    v = np.asarray(vectors, dtype=np.float64)
    v = v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
    idx: dict[tuple[str, str], int] = {(m, k): i for i, (m, k) in enumerate(zip(memory_ids, kinds))}
    char_of = dict(zip(memory_ids, characters))
    dist: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"KKE": [], "UKE": []})
    for m in dict.fromkeys(memory_ids):
        if (m, "correct") not in idx:
            continue
        c = v[idx[(m, "correct")]]
        for et in ERROR_TYPES:
            if (m, et) in idx:
                d = float(1.0 - np.dot(c, v[idx[(m, et)]]))
                dist[char_of[m]][et].append(d)
                dist["(all)"][et].append(d)
    out = {}
    for ch, dd in dist.items():
        out[ch] = {f"correct_vs_{et}": (sum(dd[et]) / len(dd[et]) if dd[et] else None) for et in ERROR_TYPES}
        out[ch]["memories"] = max(len(dd["KKE"]), len(dd["UKE"]))
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "(all)", kv[0])))


def tsne_2d(vectors: np.ndarray, seed: int = 0) -> np.ndarray | None:
    """2-D t-SNE of a few dozen vectors; None when there are too few points (< 3).

    Kept in the derived cache under a hash of the vectors and every setting: exact t-SNE on one
    thread gives the same points for the same input, and a report rebuilt on a run (or a card or
    sweep that writes its reports again) then skips scikit-learn, whose import alone takes 2-3 s."""
    n = len(vectors)
    if n < 3:
        return None
    import hashlib
    from importlib.metadata import version

    from ...store import cached_json

    x = np.ascontiguousarray(vectors, dtype=np.float64)
    perplexity = float(max(1.0, min(30.0, (n - 1) / 3)))
    method = "exact" if n <= 1000 else "barnes_hut"
    parts = {"vectors": hashlib.sha256(x.tobytes()).hexdigest(), "shape": list(x.shape), "seed": seed,
             "perplexity": perplexity, "method": method, "sklearn": version("scikit-learn")}
    return np.asarray(cached_json("knowledge-errors-tsne", parts,
                                  lambda: _tsne(x, perplexity, method, seed).tolist()), dtype=np.float64)


def _tsne(x: np.ndarray, perplexity: float, method: str, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    # Exact t-SNE on one thread: per-character plots hold a few hundred points at most, and
    # sklearn's OpenMP Barnes-Hut loop crawls when torch's threads hold the cores (measured: 116 s
    # for two 3-point plots on a loaded 2-core machine).
    with threadpool_limits(limits=1):
        return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed, learning_rate="auto",
                    method=method).fit_transform(x)
