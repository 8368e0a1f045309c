"""Beyond One World metrics: pure functions of the records (every grouping field is in `meta`).

- accuracy with a percentile bootstrap CI, weighted precision/recall/F1 over the answer letters
  (Tables 6, 7: the paper's Recall column equals its accuracy in every row, which is what
  *weighted* averaging gives), with macro averages kept as extra columns;
- per phase / hero part (Table 6) and per conflict type (Table 7);
- CoT minus direct for accuracy, weighted and macro F1 and Think-Act Matching, paired over items (Table 3);
- cross-version accuracy (Tables 9, 11), its drop from in-version accuracy on the same questions,
  and where the played and asked versions differ, whose answer the model gave;
- judge thinking/acting scores (Figure 4) and Think-Act Matching (stored in the segmenter record
  at run time), with the unparseable replies counted; TAM from the rule-based fallback segmenter
  (ours, `parsed.segmenter == "rules"`) is kept apart from the LLM segmenter's.
Rates and differences are in percent / percentage points.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

import numpy as np

from ...stats import N_BOOT, cluster_key, mean_sem, rate_ci
from ...records import ABCD, INVALID
from ...rejudge import newest_stage
TASKS = ("canon", "dilemma")
PHASES = ("childhood", "pre-hero", "hero")
CONFLICTS = ("save-one-vs-greater-good", "hero-or-villain", "duty-vs-desire", "ends-vs-moral-code")


# -- record selection ------------------------------------------------------------------------------
def is_answer(r) -> bool:
    """The record that holds the chosen letter (in-version "answer", cross "as.<version>")."""
    return r.error is None and (r.stage == "answer" or (r.stage.startswith("as.") and not r.stage.endswith(".reason")))


def answers(records: Iterable, strategy: str, task: str) -> list:
    return [r for r in records if r.strategy == strategy and r.meta.get("task") == task and is_answer(r)]


# -- precision / recall / F1 -----------------------------------------------------------------------
def prf(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Macro and weighted precision, recall and F1 (percent) over the answer letters.

    Classes are the gold letters plus any valid predicted letter; an invalid prediction is a miss
    for its gold class and counts for no class (sklearn's zero_division=0 convention).
    """
    if not gold:
        return {"macro": None, "weighted": None, "labels": []}
    labels = list(labels) if labels is not None else sorted(set(gold) | {p for p in pred if p != INVALID})
    rows = []
    for c in labels:
        tp = sum(1 for g, p in zip(gold, pred) if g == c and p == c)
        n_pred = sum(1 for p in pred if p == c)
        support = sum(1 for g in gold if g == c)
        prec = tp / n_pred if n_pred else 0.0
        rec = tp / support if support else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        rows.append((prec, rec, f1, support))
    total = sum(r[3] for r in rows)

    def avg(weights):
        w = np.asarray(weights, dtype=float)
        if w.sum() == 0:
            return None
        return {k: 100.0 * float(np.dot(w, [r[i] for r in rows]) / w.sum())
                for i, k in enumerate(("precision", "recall", "f1"))}

    return {"macro": avg([1.0] * len(rows)), "weighted": avg([r[3] for r in rows]) if total else None,
            "labels": labels}


def _f1_of(gold: np.ndarray, pred: np.ndarray, k: int, average: str = "macro") -> float:
    """Macro or weighted F1 (0-1) from integer-coded letters; pred == k means invalid. Classes:
    gold letters present plus predicted letters present (as in prf); weighted: by gold support."""
    full = np.bincount(gold * (k + 1) + pred, minlength=k * (k + 1)).reshape(k, k + 1)
    tp = np.diag(full[:, :k]).astype(float)
    support, n_pred = full.sum(1), full[:, :k].sum(0)
    present = (support > 0) | (n_pred > 0)
    if not present.any():
        return 0.0
    prec = np.divide(tp, n_pred, out=np.zeros(k), where=n_pred > 0)
    rec = np.divide(tp, support, out=np.zeros(k), where=support > 0)
    f1 = np.divide(2 * prec * rec, prec + rec, out=np.zeros(k), where=(prec + rec) > 0)
    if average == "weighted":
        return float((f1 * support).sum() / support.sum()) if support.sum() else 0.0
    return float(f1[present].mean())


def _codes(gold: Sequence[str], pred: Sequence[str], letters: str) -> tuple[np.ndarray, np.ndarray, int]:
    k = len(letters)
    g = np.array([letters.index(x) for x in gold], dtype=int)
    p = np.array([letters.index(x) if x in letters else k for x in pred], dtype=int)
    return g, p, k


def resamples(n: int, clusters: Sequence | None, *, n_boot: int = N_BOOT, seed: int = 0) -> list[np.ndarray]:
    """The bootstrap's draws as index arrays into n items: whole clusters resampled (`clusters`,
    one key per item, as stats.cluster_key gives them), else items. Clusters in sorted key order:
    the draws do not depend on record order."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        return list(rng.integers(0, n, size=(n_boot, n)))
    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(clusters):
        groups[str(c)].append(i)
    parts = [np.asarray(groups[k]) for k in sorted(groups)]
    return [np.concatenate([parts[j] for j in draw]) for draw in rng.integers(0, len(parts), size=(n_boot, len(parts)))]


def n_clusters(n: int, clusters: Sequence | None) -> int:
    return n if clusters is None else len(set(map(str, clusters)))


def f1_ci(gold, pred, letters: str, *, n_boot: int = N_BOOT, seed: int = 0,
          average: str = "macro", clusters: Sequence | None = None) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI (percent) of macro or weighted F1, resampling `clusters` (one key
    per item; None: items). The report withholds it under MIN_CLUSTERS clusters (`f1_clusters`)."""
    if len(gold) < 2:
        return (None, None)
    g, p, k = _codes(gold, pred, letters)
    vals = [_f1_of(g[idx], p[idx], k, average) for idx in resamples(len(g), clusters, n_boot=n_boot, seed=seed)]
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return (100.0 * float(lo), 100.0 * float(hi))


def paired_diff(a: Sequence[float], b: Sequence[float], *, stat: str = "mean", letters: str = "",
                gold: Sequence[str] | None = None, n_boot: int = N_BOOT, seed: int = 0,
                average: str = "macro", clusters: Sequence | None = None) -> dict | None:
    """b - a over paired items with a percentile bootstrap CI, resampling whole `clusters` (one key
    per pair, the suite's declaration; None: each pair its own).

    stat "mean": a, b are per-item values (1/0 correctness, cosines); "f1": a, b are predicted
    letters and `gold` the gold letters (F1 difference, `average` macro or weighted). Rates come
    back in percent points. `clusters` in the result: their number (under MIN_CLUSTERS the report
    prints no CI).
    """
    n = len(a)
    if n == 0:
        return None
    idx = resamples(n, clusters, n_boot=n_boot, seed=seed)
    if stat == "f1":
        g, pa, k = _codes(gold, a, letters)
        _, pb, _ = _codes(gold, b, letters)
        point = 100.0 * (_f1_of(g, pb, k, average) - _f1_of(g, pa, k, average))
        boots = [100.0 * (_f1_of(g[i], pb[i], k, average) - _f1_of(g[i], pa[i], k, average))
                 for i in idx] if n > 1 else [point]
    else:
        va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        scale = 100.0 if stat == "rate" else 1.0
        point = scale * float((vb - va).mean())
        boots = [scale * float((vb[i] - va[i]).mean()) for i in idx] if n > 1 else [point]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"diff": point, "lo": float(lo), "hi": float(hi), "n": n, "clusters": n_clusters(n, clusters)}


# -- per strategy and task -------------------------------------------------------------------------
def _letters(recs) -> str:
    for r in recs:
        if r.meta.get("letters"):
            return r.meta["letters"]
    return ABCD


def accuracy_block(recs: list, group_field: str, groups: Sequence[str], clusters: dict | None = None) -> dict[str, Any]:
    """Accuracy, F1 and choice shares of one strategy and task; accuracy CIs resample the clusters
    the suite declares (`clusters`: MultiverseSuite.clusters)."""
    letters = _letters(recs)
    labelled = [r for r in recs if r.gold is not None]
    gold = [r.gold for r in labelled]
    pred = [r.parsed if r.parsed in letters else INVALID for r in labelled]
    scores = prf(gold, pred)
    cl = [cluster_key(r, clusters) for r in labelled]
    lo, hi = f1_ci(gold, pred, letters, clusters=cl)
    wlo, whi = f1_ci(gold, pred, letters, average="weighted", clusters=cl)
    out: dict[str, Any] = {
        "n": len(recs), "labelled": len(labelled), "invalid": sum(1 for r in recs if r.parsed not in letters),
        "acc": rate_ci([bool(r.correct) for r in labelled], cl),
        "macro": scores["macro"], "f1_clusters": n_clusters(len(cl), cl),
        "weighted": scores["weighted"], "macro_f1_ci": [lo, hi], "weighted_f1_ci": [wlo, whi],
        "choice_share": {L: _rate(recs, lambda r, L=L: r.parsed == L, clusters) for L in letters} if recs else {},
    }
    by: dict[str, list] = defaultdict(list)
    for r in labelled:
        by[r.meta.get(group_field)].append(r)
    out[f"by_{group_field}"] = {g: _rate(by[g], lambda r: bool(r.correct), clusters) for g in groups if by.get(g)}
    if group_field == "conflict":
        share: dict[str, list] = defaultdict(list)
        for r in recs:
            share[r.meta.get("conflict")].append(r)
        out["first_pole_share"] = {g: _rate(share[g], lambda r: r.parsed == "A", clusters)
                                   for g in groups if share.get(g)}
    if group_field == "phase":
        parts: dict[str, list] = defaultdict(list)
        for r in labelled:
            if r.meta.get("phase") == "hero" and r.meta.get("part"):
                parts[f"hero{r.meta['part']}"].append(r)
        out["by_part"] = {k: _rate(v, lambda r: bool(r.correct), clusters) for k, v in sorted(parts.items())}
    return out


def _rate(recs: list, outcome, clusters: dict | None) -> dict:
    """rate_ci of outcome(r) over recs, resampling the clusters the suite declares."""
    return rate_ci([outcome(r) for r in recs], [cluster_key(r, clusters) for r in recs])


def segmenter_of(r) -> str | None:
    """'llm' or 'rules' for a segmenter record with a TAM value (older records: llm), else None."""
    if isinstance(r.parsed, dict) and "tam" in r.parsed:
        return r.parsed.get("segmenter", "llm")
    return None


def analysis_block(records: list, strategy: str, task: str) -> dict[str, Any]:
    seg = [r for r in records if r.strategy == strategy and r.stage == "segment" and r.error is None
           and r.meta.get("task") == task]
    # the judge of the newest round (a re-judge writes judge@N), never the score of judge.think
    jud = [r for r in newest_stage(records, "judge") if r.strategy == strategy and r.error is None
           and r.meta.get("task") == task]
    tam = [r.parsed["tam"] for r in seg if segmenter_of(r) == "llm"]
    # the rule-based fallback (ours) only ran where the LLM segmentation was invalid; kept apart
    tried = [r for r in seg if segmenter_of(r) != "llm" and r.meta.get("segment_fallback") == "rules"]
    rules = [r.parsed["tam"] for r in tried if segmenter_of(r) == "rules"]
    valid = [r.parsed for r in jud if isinstance(r.parsed, dict)]
    out = {"segment_calls": len(seg), "segment_invalid": len(seg) - len(tam),
           "rules_tried": len(tried), "rules_invalid": len(tried) - len(rules),
           "judge_calls": len(jud), "judge_invalid": len(jud) - len(valid),
           "judge_scoring": ", ".join(sorted({r.meta.get("judge_scoring", "generate") for r in jud})) or None}
    for key in ("thinking", "acting"):
        m, s = mean_sem([v[key] for v in valid])
        out[f"judge_{key}"] = {"mean": m, "sem": s, "n": len(valid)}
    # the most frequent score pair: a judge that echoes the prompt's example "3,2" shows here
    pairs = Counter(f"{v['thinking']:g},{v['acting']:g}" for v in valid)
    out["judge_top"] = ({"pair": pairs.most_common(1)[0][0], "n": pairs.most_common(1)[0][1]} if pairs else None)
    for key, vals in (("tam", tam), ("tam_rules", rules)):
        m, s = mean_sem(vals)
        out[key] = {"mean": m, "sem": s, "n": len(vals)}
    embedders = sorted({r.meta.get("embedder") for r in seg if r.meta.get("embedder")})
    out["embedder"] = ", ".join(embedders) or None
    return out


def _key(r) -> tuple[str, int]:
    """Items are paired within a repeat (--repeats N gives N pairs per item)."""
    return (r.item_id, r.repeat)


def _by_item(recs: list) -> dict[tuple[str, int], Any]:
    return {_key(r): r for r in recs}


def cot_minus_direct(records: list, task: str, clusters: dict | None = None) -> dict[str, Any] | None:
    """Table 3: CoT - direct on the items both answered (paired bootstrap over the clusters the
    suite declares: a pair's is its direct record's)."""
    d = _by_item([r for r in answers(records, "direct", task) if r.gold is not None])
    c = _by_item([r for r in answers(records, "cot", task) if r.gold is not None])
    both = sorted(set(d) & set(c))
    if not both:
        return None
    letters = _letters(d.values())
    pd_ = [d[i].parsed if d[i].parsed in letters else INVALID for i in both]
    pc = [c[i].parsed if c[i].parsed in letters else INVALID for i in both]
    gold = [d[i].gold for i in both]
    cl = [cluster_key(d[i], clusters) for i in both]
    out = {"acc": paired_diff([float(bool(d[i].correct)) for i in both], [float(bool(c[i].correct)) for i in both],
                              stat="rate", clusters=cl),
           "weighted_f1": paired_diff(pd_, pc, stat="f1", letters=letters, gold=gold, average="weighted", clusters=cl),
           "macro_f1": paired_diff(pd_, pc, stat="f1", letters=letters, gold=gold, clusters=cl)}
    for key, segmenter in (("tam", "llm"), ("tam_rules", "rules")):
        seg = {_key(r): r for r in records if r.stage == "segment" and r.meta.get("task") == task}
        tam = {strat: {_key(r): r.parsed["tam"] for r in records
                       if r.strategy == strat and r.stage == "segment" and r.error is None
                       and r.meta.get("task") == task and segmenter_of(r) == segmenter}
               for strat in ("direct", "cot")}
        tboth = sorted(set(tam["direct"]) & set(tam["cot"]))
        out[key] = paired_diff([tam["direct"][i] for i in tboth], [tam["cot"][i] for i in tboth],
                               clusters=[cluster_key(seg[i], clusters) for i in tboth]) if tboth else None
    return out


def cross_block(records: list, cross: str, task: str, clusters: dict | None = None) -> dict[str, Any] | None:
    base = "cot" if cross.endswith("cot") else "direct"
    recs = answers(records, cross, task)
    if not recs:
        return None
    letters = _letters(recs)
    labelled = [r for r in recs if r.gold is not None]
    out: dict[str, Any] = {"n": len(recs), "labelled": len(labelled),
                           "invalid": sum(1 for r in recs if r.parsed not in letters),
                           "acc": rate_ci([bool(r.correct) for r in labelled],
                                          [cluster_key(r, clusters) for r in labelled])}
    per_item: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for r in labelled:
        per_item[_key(r)].append(bool(r.correct))
    own = _by_item([r for r in answers(records, base, task) if r.gold is not None])
    shared = sorted(set(per_item) & set(own))
    # the same questions clustered as in-version: a question's cluster is its in-version record's
    cl = {i: cluster_key(own[i], clusters) for i in shared}
    out["in_version"] = rate_ci([bool(own[i].correct) for i in shared], [cl[i] for i in shared]) if shared else None
    out["cross_same_items"] = rate_ci([c for i in shared for c in per_item[i]],
                                      [cl[i] for i in shared for _ in per_item[i]]) if shared else None
    # drop = in-version - cross on the same asked questions (positive: worse as another version)
    drop = paired_diff([float(np.mean(per_item[i])) for i in shared], [float(bool(own[i].correct)) for i in shared],
                       stat="rate", clusters=[cl[i] for i in shared]) if shared else None
    out["drop"] = drop
    out["base"] = base
    differ = [r for r in labelled if r.meta.get("gold_own") and r.meta["gold_own"] != r.gold]
    out["differs"] = {
        "n": len(differ),
        "asked_version": _rate(differ, lambda r: r.parsed == r.gold, clusters),
        "played_version": _rate(differ, lambda r: r.parsed == r.meta["gold_own"], clusters),
        "other": sum(1 for r in differ if r.parsed in letters and r.parsed not in (r.gold, r.meta["gold_own"])),
        "invalid": sum(1 for r in differ if r.parsed not in letters),
    }
    pairs: dict[tuple[str, str], list] = defaultdict(list)
    for r in labelled:
        pairs[(r.meta.get("played"), r.meta.get("version"))].append(r)
    # a canon pair is one hero, so one cluster: its accuracy is shown without a CI
    out["by_pair"] = [{"hero": next((r.meta.get("hero") for r in labelled if r.meta.get("played") == p), None),
                       "played": p, "asked": a, **_rate(v, lambda r: bool(r.correct), clusters)}
                      for (p, a), v in sorted(pairs.items())]
    return out


def compute(records: list, manifest, clusters: dict | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"strategies": {}, "cot_minus_direct": {}, "cross": {}}
    strategies = list(manifest.strategies)
    for strat in strategies:
        block = {}
        for task in TASKS:
            recs = answers(records, strat, task)
            if not recs:
                continue
            b = accuracy_block(recs, "phase" if task == "canon" else "conflict",
                               PHASES if task == "canon" else CONFLICTS, clusters)
            a = analysis_block(records, strat, task)
            if a["segment_calls"] or a["judge_calls"]:
                b["analysis"] = a
            block[task] = b
        out["strategies"][strat] = block
    if "direct" in strategies and "cot" in strategies:
        out["cot_minus_direct"] = {t: cot_minus_direct(records, t, clusters) for t in TASKS}
    for strat in strategies:
        if strat.startswith("cross-"):
            out["cross"][strat] = {t: cross_block(records, strat, t, clusters) for t in TASKS}
    out["failed_calls"] = sum(1 for r in records if r.error)
    out["records"] = len(records)
    return out


# -- the dialogue strategy: canon and dilemma accuracy by depth (rolebound.dialogue.metrics) -------
DIALOGUE_NAMES = ["canon", "dilemma"]


def dialogue_values(recs) -> dict[str, dict]:
    """Accuracy over the labelled answers, as accuracy_block's `acc` reads them (a dilemma
    without a canonical choice has no gold)."""
    return {t: {r.item_id: bool(r.correct) for r in recs if r.meta.get("task") == t and r.gold is not None}
            for t in DIALOGUE_NAMES}


def dialogue(records) -> dict[str, Any]:
    from ...dialogue.metrics import compute as by_depth

    return by_depth(records, dialogue_values, DIALOGUE_NAMES, dialogue_clusters,
                    "version (every probe of a version follows its one conversation)")


def dialogue_clusters(recs) -> dict[str, str]:
    """Each key's cluster: the version its dialogue plays (the plan's key, strategies.py)."""
    return {r.item_id: f"version={r.meta.get('version')}" for r in recs}
