"""CHARM metrics: pure functions of records (no model calls, no dataset access).

Every record carries in `meta` what pairing needs: stage (ba|bc|kv|nr|seq.ba|seq.bc), boundary
(temporal|cross), role, region, target, fact, fact_option (1-based position of the factual option),
ba_id / kv_id (the paired items), sim (mean distractor-to-answer cosine).

An *instance* is one compliance (BC) question paired with the awareness (BA) question of the same
(role, target); its cell in the BA-BC matrix follows Table 1. Invalid answers (no Yes/No, no
`Answer: <n>`) count as incorrect and are reported separately.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from ...records import INVALID, Record
from ...stats import cluster_key, mean_std, paired_diff, rate_ci

CELLS = ("consistent", "compliance_gap", "incidental_refusal", "recognition_failure")
CELL_LABELS = {"consistent": "Consistent", "compliance_gap": "Compliance Gap",
               "incidental_refusal": "Incidental Refusal", "recognition_failure": "Recognition Failure"}
INDEPENDENT = "independent"


def _ok(records: Iterable[Record], strategy: str, stage: str) -> dict[str, Record]:
    """item_id -> record for one strategy and stage (failed calls left out)."""
    return {r.item_id: r for r in records
            if r.strategy == strategy and r.stage == stage and r.error is None and r.role == "model"}


def _icl(inst: list[dict]) -> list[str]:
    """The instances' cluster keys (instances() sets them)."""
    return [i.get("cluster") or i["bc_id"] for i in inst]


def cell(ba_true: bool, bc_true: bool) -> str:
    """Table 1."""
    if ba_true:
        return "consistent" if bc_true else "compliance_gap"
    return "incidental_refusal" if bc_true else "recognition_failure"


def instances(records: list[Record], strategy: str = INDEPENDENT, clusters: dict | None = None) -> list[dict[str, Any]]:
    """Paired (BA, BC[, KV]) instances of the independent runs (Section 3.2); `cluster`: the BC
    record's under the suite's declaration (stage "instance")."""
    ba, bc, kv = (_ok(records, strategy, s) for s in ("ba", "bc", "kv"))
    out = []
    for bc_id, r in bc.items():
        m = r.meta
        b = ba.get(m.get("ba_id"))
        if b is None:
            continue
        k = kv.get(m.get("kv_id")) if m.get("kv_id") else None
        ba_true, bc_true = bool(b.correct), bool(r.correct)
        out.append({
            "bc_id": bc_id, "boundary": m.get("boundary"), "region": m.get("region"), "role": m.get("role"),
            "target": m.get("target"), "fact": m.get("fact"), "ba": ba_true, "bc": bc_true,
            "cell": cell(ba_true, bc_true),
            # Table 9: which kind of wrong answer
            "fc_bc": r.parsed != INVALID and r.parsed == m.get("fact_option"),
            "bc_invalid": r.parsed == INVALID, "ba_invalid": b.parsed == INVALID,
            "kv": None if k is None else bool(k.correct), "kv_id": m.get("kv_id"),
            "fact_option": m.get("fact_option"),
            "sim": m.get("sim"), "cluster": cluster_key(r, clusters, "instance"),
        })
    return out


def matrix(inst: list[dict]) -> dict[str, Any]:
    """BA-BC matrix rates over instances (Tables 1, 2, 6)."""
    res: dict[str, Any] = {"n": len(inst)}
    cl = _icl(inst)
    for c in CELLS:
        res[c] = rate_ci([i["cell"] == c for i in inst], cl)
        res[c]["count"] = sum(1 for i in inst if i["cell"] == c)
    res["ba_acc"] = rate_ci([i["ba"] for i in inst], cl)
    res["bc_acc"] = rate_ci([i["bc"] for i in inst], cl)
    return res


def bc_false_split(inst: list[dict]) -> dict[str, Any]:
    """Table 9: BC=False split into factually-correct vs other distractor (and invalid)."""
    wrong = [i for i in inst if not i["bc"]]
    out: dict[str, Any] = {"n_bc_false": len(wrong)}
    for ba in (True, False):
        rows = [i for i in wrong if i["ba"] == ba]
        key = "ba_true" if ba else "ba_false"
        out[key] = {"factually_correct": sum(1 for i in rows if i["fc_bc"]),
                    "other_distractor": sum(1 for i in rows if not i["fc_bc"] and not i["bc_invalid"]),
                    "invalid": sum(1 for i in rows if i["bc_invalid"])}
    return out


def override(inst: list[dict]) -> dict[str, Any]:
    """Parametric override over Cross-Universe instances (Section 3.2, Appendix G, Tables 3 and 10):
    rate = #(BA+ & FC-BC & FC-KVQ) / #(BA+ & FC-BC)."""
    cross = [i for i in inst if i["boundary"] == "cross"]
    ba_pos = [i for i in cross if i["ba"]]
    cand = [i for i in ba_pos if i["fc_bc"]]
    with_kv = [i for i in cand if i["kv"] is not None]
    verified = [i for i in with_kv if i["kv"]]
    res = rate_ci([bool(i["kv"]) for i in with_kv], _icl(with_kv))
    res.update({"n_cross": len(cross), "ba_pos": len(ba_pos), "ba_pos_fc_bc": len(cand),
                "ba_pos_fc_bc_fc_kv": len(verified), "missing_kv": len(cand) - len(with_kv)})
    return res


CONTROL = "kv~ctl"


def override_control(records: list[Record], inst: list[dict]) -> dict[str, Any]:
    """The override rate with the KV options in the paper's order and in the control order (a
    fixed, seeded permutation that moves the factual option), over the candidates asked both ways.
    `same_position`: control answers given at the position the paper-order answer had (a model
    that picks by position keeps it; one that picks by content follows the option)."""
    ctl = _ok(records, INDEPENDENT, CONTROL)
    if not ctl:
        return {}
    kv = _ok(records, INDEPENDENT, "kv")
    cand = [i for i in inst if i["boundary"] == "cross" and i["ba"] and i["fc_bc"] and i["kv"] is not None
            and i.get("kv_id") in ctl]
    cand.sort(key=lambda i: i["bc_id"])
    # clustered as the override rate is (the instances' targets): these are its candidates
    cl = _icl(cand)
    paper = rate_ci([bool(i["kv"]) for i in cand], cl)
    control = rate_ci([bool(ctl[i["kv_id"]].correct) for i in cand], cl)
    kept = [i for i in cand if i["kv_id"] in kv and ctl[i["kv_id"]].parsed != INVALID]
    same = rate_ci([ctl[i["kv_id"]].parsed == kv[i["kv_id"]].parsed for i in kept], _icl(kept))
    diff = None if paper["rate"] is None or control["rate"] is None else control["rate"] - paper["rate"]
    outside = diff is not None and paper["lo"] is not None and not (paper["lo"] <= control["rate"] <= paper["hi"])
    paired = paired_diff({i["bc_id"]: bool(i["kv"]) for i in cand},
                         {i["bc_id"]: bool(ctl[i["kv_id"]].correct) for i in cand},
                         {i["bc_id"]: c for i, c in zip(cand, cl)}) if cand else None
    return {"n": len(cand), "paper_order": paper, "control_order": control, "diff": diff, "paired": paired,
            "outside_ci": bool(outside), "same_position": same}


YES_CONTROL = "ba~yes"


def yes_control(records: list[Record], clusters: dict | None = None) -> dict[str, Any]:
    """The BA Yes control: in-boundary awareness questions whose answer is Yes. `said_no`: the
    share of them answered "No" (a model that always says No: 100%), beside `ba_said_no`, the
    share of this run's BA questions (all gold No) answered No, which is BA accuracy. Clustered
    as the suite declares (`clusters`: the control by item, BA as BA accuracy is)."""
    yes = list(_ok(records, INDEPENDENT, YES_CONTROL).values())
    if not yes:
        return {}
    ba = list(_ok(records, INDEPENDENT, "ba").values())
    cy, cb = [cluster_key(r, clusters) for r in yes], [cluster_key(r, clusters) for r in ba]
    return {"n": len(yes), "roles": len({r.meta.get("role") for r in yes}),
            "said_no": rate_ci([r.parsed == "No" for r in yes], cy),
            "said_yes": rate_ci([bool(r.correct) for r in yes], cy),
            "invalid": sum(1 for r in yes if r.parsed == INVALID),
            "ba_said_no": rate_ci([r.parsed == "No" for r in ba], cb)}


def by_region(inst: list[dict]) -> dict[str, Any]:
    """C-Gap (both boundary types) and override (cross) per region (Tables 4, 17, 18 for one model)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for i in inst:
        groups[i["region"]].append(i)
    out = {}
    for region, rows in sorted(groups.items()):
        ov = override(rows)
        out[region] = {"c_gap": rate_ci([r["cell"] == "compliance_gap" for r in rows], _icl(rows)), "n": len(rows),
                       "override": ov, "n_override": ov["ba_pos_fc_bc"], "n_cross": ov["n_cross"]}
    return out


def stage_accuracy(records: list[Record], strategy: str = INDEPENDENT, clusters: dict | None = None) -> dict[str, Any]:
    """Accuracy per question type over all questions asked (BA, BC, KV), with invalid counts;
    clustered as the suite declares (`clusters`; None: by item)."""
    out = {}
    for stage in ("ba", "bc", "kv"):
        recs = list(_ok(records, strategy, stage).values())
        for boundary in ("all", "temporal", "cross"):
            rows = recs if boundary == "all" else [r for r in recs if r.meta.get("boundary") == boundary]
            if not rows:
                continue
            d = rate_ci([bool(r.correct) for r in rows], [cluster_key(r, clusters) for r in rows])
            d["invalid"] = sum(1 for r in rows if r.parsed == INVALID)
            out[f"{stage}/{boundary}"] = d
    return out


def sequential(records: list[Record], clusters: dict | None = None) -> dict[str, Any]:
    """Table 15: BC accuracy, independent vs sequential BA->BC in one conversation; `paired`: the
    difference on the questions asked both ways, with its cluster-bootstrap CI and McNemar p."""
    ind = _ok(records, INDEPENDENT, "bc")
    seq = _ok(records, "sequential", "seq.bc")
    if not seq:
        return {}
    out = {}
    for boundary in ("cross", "temporal", "all"):
        s = [r for r in seq.values() if boundary == "all" or r.meta.get("boundary") == boundary]
        if not s:
            continue
        i = [ind[r.item_id] for r in s if r.item_id in ind]
        d_s = rate_ci([bool(r.correct) for r in s], [cluster_key(r, clusters, "bc") for r in s])
        d_i = rate_ci([bool(r.correct) for r in i], [cluster_key(r, clusters) for r in i]) if i else None
        paired = paired_diff({r.item_id: bool(r.correct) for r in i}, {r.item_id: bool(r.correct) for r in s},
                             {r.item_id: cluster_key(r, clusters, "bc") for r in s}) if i else None
        out[boundary] = {"sequential": d_s, "independent": d_i,
                         "diff": (d_s["rate"] - d_i["rate"]) if d_i and d_i["rate"] is not None else None,
                         "paired": paired, "n": len(s), "n_independent": len(i)}
    return out


def no_role(records: list[Record], inst: list[dict], clusters: dict | None = None) -> dict[str, Any]:
    """Table 16: over the override candidates (Cross-Universe, BA+ & FC-BC) — KVQ%: correct as the
    target; NR%: correct with no role; Both%. (In the paper KVQ% equals the Table 3 override rate,
    which fixes the denominator.) `nr_minus_kvq`: NR% - KVQ% paired on the candidates, with its CI.
    Also NR accuracy over all Cross-Universe BC questions."""
    nr = _ok(records, "no-role", "nr")
    if not nr:
        return {}
    cand = [i for i in inst if i["boundary"] == "cross" and i["ba"] and i["fc_bc"]
            and i["kv"] is not None and i["bc_id"] in nr]
    cl = _icl(cand)
    return {
        "n": len(cand),
        "kvq": rate_ci([bool(i["kv"]) for i in cand], cl),
        "nr": rate_ci([bool(nr[i["bc_id"]].correct) for i in cand], cl),
        "both": rate_ci([bool(i["kv"]) and bool(nr[i["bc_id"]].correct) for i in cand], cl),
        "nr_minus_kvq": paired_diff({i["bc_id"]: bool(i["kv"]) for i in cand},
                                    {i["bc_id"]: bool(nr[i["bc_id"]].correct) for i in cand},
                                    {i["bc_id"]: i["cluster"] for i in cand}),
        "nr_all": rate_ci([bool(r.correct) for r in nr.values()], [cluster_key(r, clusters) for r in nr.values()]),
        "nr_invalid": sum(1 for r in nr.values() if r.parsed == INVALID),
    }


def similarity(records: list[Record], top: float = 0.2, clusters: dict | None = None) -> dict[str, Any]:
    """Table 14: accuracy on the items whose distractors are most (top 20%) vs least (bottom 20%)
    similar to the correct answer (mean cosine of the distractors to the answer); CIs clustered as
    the suite declares the stage (`clusters`: a fact asked of several characters is one unit)."""
    out: dict[str, Any] = {}
    embedder = next((r.meta.get("embedder") for r in records if r.meta.get("embedder")), None)
    for stage in ("bc", "kv"):
        recs = [r for r in _ok(records, INDEPENDENT, stage).values() if r.meta.get("sim") is not None]
        if len(recs) < 5:
            continue
        recs.sort(key=lambda r: r.meta["sim"])
        k = max(1, int(round(len(recs) * top)))
        low, high = recs[:k], recs[-k:]
        h, lo = ([rate_ci([bool(r.correct) for r in part], [cluster_key(r, clusters) for r in part])
                  for part in (high, low)])
        out[stage] = {"high": h, "low": lo, "gap": h["rate"] - lo["rate"], "k": k, "n": len(recs),
                      "sim_high_min": high[0].meta["sim"], "sim_low_max": low[-1].meta["sim"]}
    if out:
        out["embedder"] = embedder
    return out


def compute(records: list[Record], clusters: dict | None = None) -> dict[str, Any]:
    """Every figure; `clusters`: the suite's declaration (CharmSuite.clusters; None: by item)."""
    inst = instances(records, clusters=clusters)
    return {
        "stage_accuracy": stage_accuracy(records, clusters=clusters),
        "matrix": {"all": matrix(inst),
                   "temporal": matrix([i for i in inst if i["boundary"] == "temporal"]),
                   "cross": matrix([i for i in inst if i["boundary"] == "cross"])},
        "bc_false_split": {"all": bc_false_split(inst),
                           "temporal": bc_false_split([i for i in inst if i["boundary"] == "temporal"]),
                           "cross": bc_false_split([i for i in inst if i["boundary"] == "cross"])},
        "override": override(inst),
        "override_control": override_control(records, inst),
        "ba_control": yes_control(records, clusters),
        "by_region": by_region(inst),
        "sequential": sequential(records, clusters),
        "no_role": no_role(records, inst, clusters),
        "similarity": similarity(records, clusters=clusters),
        "n_instances": len(inst),
        "failed_calls": sum(1 for r in records if r.error),
    }


def across_models(per_model: dict[str, dict]) -> dict[str, Any]:
    """Table 17: per region, mean +- std across models of C-Gap and override, with instance counts."""
    regions = sorted({reg for m in per_model.values() for reg in m.get("by_region", {})})
    out = {}
    for reg in regions:
        gaps = [m["by_region"][reg]["c_gap"]["rate"] for m in per_model.values()
                if reg in m.get("by_region", {}) and m["by_region"][reg]["c_gap"]["rate"] is not None]
        ovs = [m["by_region"][reg]["override"]["rate"] for m in per_model.values()
               if reg in m.get("by_region", {}) and m["by_region"][reg]["override"]["rate"] is not None]
        # Table 17's n: the instances behind each rate (the same items for every model)
        n = max((m["by_region"][reg]["n"] for m in per_model.values() if reg in m.get("by_region", {})), default=0)
        n_ov = max((m["by_region"][reg]["n_cross"] for m in per_model.values() if reg in m.get("by_region", {})),
                   default=0)
        # each figure counts the models that have it: one alone has no spread across models
        out[reg] = {"c_gap": mean_std(gaps), "n": n, "override": mean_std(ovs), "n_override": n_ov,
                    "models": len(gaps), "models_c_gap": len(gaps), "models_override": len(ovs)}
    return out


# -- the dialogue strategy: BA, BC, C-Gap, R-Fail by depth (rolebound.dialogue.metrics) ------------
DIALOGUE_NAMES = ["BA", "BC", "C-Gap", "R-Fail"]


def dialogue_values(recs) -> dict[str, dict]:
    """The headline figures of one (warm-up, depth): the probes read as independent records by
    this module's own code, so depth 0 is the single-turn figure."""
    from ...dialogue.metrics import relabel

    single = relabel(recs, INDEPENDENT, lambda r: r.meta.get("probe", r.stage.split("@")[0]))
    inst = instances(single)
    return {"BA": {r.item_id: bool(r.correct) for r in single if r.stage == "ba"},
            "BC": {r.item_id: bool(r.correct) for r in single if r.stage == "bc"},
            "C-Gap": {i["bc_id"]: i["cell"] == "compliance_gap" for i in inst},
            "R-Fail": {i["bc_id"]: i["cell"] == "recognition_failure" for i in inst}}


def dialogue(records) -> dict[str, Any]:
    from ...dialogue.metrics import compute as by_depth

    return by_depth(records, dialogue_values, DIALOGUE_NAMES, dialogue_clusters,
                    "role (every probe of a role follows its one conversation)")


def dialogue_clusters(recs) -> dict[str, str]:
    """Each key's cluster: the role its dialogue plays (the plan's key, strategies.py)."""
    return {r.item_id: f"role={r.meta.get('role')}" for r in recs}
