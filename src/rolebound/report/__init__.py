"""A run's report. `build(run_dir)` is the one path from a run's records to its report: the
run's own report (api.run) and `rolebound report RUN` both call it. Here too, what every report
holds besides the suite's own part: the run-level figures added to the suite's metrics (exact
score ties, position bias, shifted option orders, mean +- SEM over repeats, model-based
extraction), the facts every report opens with, the run-level sections (position bias, shifted
option orders, repeats) and the order of the whole report (assemble). The other parts:
papers.py (the papers' figures beside the run's), builder.py (Report: sections -> report.md +
report.html; figures drawn without pyplot; the sample viewer's data), fmt.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..stats import mean_sem, position_bias, shifted_orders
from . import papers
from .builder import Report
from .fmt import few_clusters, fmt_pct, fmt_rate, untrusted


def build(run_dir: str | Path, suite=None) -> tuple[dict, list[Path]]:
    """metrics.json, report.md and report.html of a suite's run, from records.jsonl alone: the
    suite computes its metrics and returns its part of the report (a Report: title, its facts
    and sections), and assemble() puts the run-level sections around it. A suite whose report
    hook wrote its own files returns their paths instead. `suite`: the run's suite where the
    caller has it (api.run, api.build_report), else looked up from the manifest. The caller
    holds the run's lock."""
    from ..records import canonical_order, split_extracted
    from ..store import RunDir, load_records
    from ..suites import get_suite

    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    suite = suite or get_suite(manifest.suite)
    # the extractor's records never enter the suite's own figures; they are reported apart
    records, extracted = split_extracted(canonical_order(load_records(run_dir)))
    metrics = compute_metrics(suite, records, extracted, manifest)
    rd.write_json("metrics.json", metrics)
    own = suite.report(metrics, records, manifest, run_dir)
    if isinstance(own, (list, tuple)):
        return metrics, list(own)
    return metrics, assemble(suite, own, metrics, manifest).write(run_dir)


SKIP_DOC = "docs/usage.md, Models: prefilling on API backends"


def compute_metrics(suite, records, extracted, manifest) -> dict[str, Any]:
    """metrics.json: the suite's metrics of the records, then the run-level figures. `extracted`:
    the --extractor's records, kept out of the suite's own figures and reported apart."""
    metrics = suite.metrics(records, manifest)
    metrics["score_ties"] = score_ties(records)
    metrics["position_bias"] = position_bias(records)           # every multiple-choice stage
    metrics["cut_at_cap"] = cut_at_cap(records)                 # replies the token cap cut off
    if sh := shifted_orders(records, suite.clusters):           # --set permutations=K
        metrics["shifts"] = sh
    if manifest.repeats > 1 and not suite.repeats_native:
        metrics["over_repeats"] = over_repeats(suite, records, manifest)
    if manifest.extractor:                                      # --extractor: what it read, apart
        from ..scoring import model_extract

        metrics["model_extraction"] = model_extract.figures(suite, records, extracted, manifest)
    return metrics


def assemble(suite, own: Report | None, metrics: dict, manifest) -> Report:
    """The whole report, in its final order. Facts: the run's, the suite's own, a position-bias
    warning, the comparison with the paper. Sections: the paper's figures beside the run's and
    position bias, the suite's own, then accuracy under shifted option orders and mean +- SEM over
    repeats. `own`: what the suite's report hook returned (None: its title and summary lines)."""
    if own is None:
        own = Report(f"{suite.name}: {manifest.model}")
        own.table("Summary", ["", "value"], [list(kv) for kv in suite.summary(metrics)])
    rep = Report(own.title, own.subtitle)
    rep.records = own.records
    rep.facts(run_facts(manifest, metrics))
    rep.meta += own.meta
    position_warning(rep, metrics)
    uncertainty_section(rep, suite, metrics, manifest)
    papers.paper_section(rep, suite, metrics, manifest)
    position_sections(rep, metrics)
    rep.sections += own.sections
    shift_sections(rep, metrics)
    cap_section(rep, metrics)
    repeats_section(rep, metrics)
    return rep


def headline_rows(suite, metrics: dict, manifest) -> list[list[Any]]:
    """One row per headline figure the suite declares (Suite.headline: label, metrics path,
    stage): its value and CI, what it is clustered by, the clusters, the design effect and the
    minimum detectable paired difference; under --limit, the MDD of the whole set too."""
    from ..stats import cluster_by_text

    whole = getattr(manifest, "dataset_items", None)
    scale = (manifest.n_items / whole) ** 0.5 if manifest.limit and whole and whole > manifest.n_items else None
    rows = []
    for label, path, stage in suite.headline:
        d = _at(metrics, path)
        if not isinstance(d, dict) or d.get("rate") is None or "clusters" not in d:
            continue
        se = "-" if d.get("se") is None else f"{d['se']:.2f} / {d['se_item']:.2f}"
        mdd = None if d.get("mdd") is None or not d.get("trusted") else d["mdd"]    # few clusters: no SE to trust
        mdd_text = "-" if mdd is None else f"{mdd:.1f}"
        if d["rate"] in (0.0, 100.0):       # no spread: an SE of 0 would read as 'detects anything'
            se, mdd_text = "- (rate at 0%/100%)", "- (undefined at 0%/100%)"
        row = [label, fmt_rate(d), d["n"], cluster_by_text(suite.clusters, stage), d["clusters"],
               "-" if d.get("deff") is None else f"{d['deff']:.2f}", se, mdd_text]
        if scale is not None:
            row.append(mdd_text if d["rate"] in (0.0, 100.0) or mdd is None else f"{mdd * scale:.1f}")
        rows.append(row)
    return rows


def uncertainty_section(rep: Report, suite, metrics: dict, manifest) -> None:
    """The headline table: each figure with its clustered CI, its clusters and design effect, and
    what difference this run can detect (issue 51)."""
    rows = headline_rows(suite, metrics, manifest)
    if not rows:
        return
    heads = ["figure", "value [95% CI]", "n", "clustered by", "clusters", "design effect",
             "SE clustered / items independent", "MDD (pp)"]
    whole = getattr(manifest, "dataset_items", None)
    if rows and len(rows[0]) > len(heads):
        heads.append(f"MDD, whole set of {whole} items (pp)")
    rep.table("Headline figures: uncertainty and what this run can detect", heads, rows,
              note="CIs resample whole clusters (the unit the benchmark's design repeats; repeats of an item share "
                   "one), 2,000 seeded draws; SE as inspect_ai's stderr(cluster=...) defines it, in points. Design "
                   "effect: the clustered variance over the variance with items independent. MDD: the smallest "
                   "difference from another run of this size and clustering that a paired comparison finds 80% of "
                   "the time at two-sided 0.05 (2.80 x sqrt(2) x SE: the two runs taken as uncorrelated item by "
                   "item; a correlation makes it smaller). Under 10 clusters no interval is printed: it cannot be "
                   "trusted. At a rate of 0% or 100% the outcomes have no spread, so the SE is 0 and no MDD follows "
                   "from it (the CI is then the exact binomial one over the clusters)." + (" Whole set: the MDD scaled by sqrt(items run / items in the set), the set "
                                 "assumed to cluster as this subset does." if len(heads) > 8 else ""))


def _at(d: Any, path: str) -> Any:
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def run_facts(manifest, metrics: dict | None = None) -> list[tuple[str, Any]]:
    """The lines every report opens with; `metrics` adds the exact score ties."""
    c = manifest.counts or {}
    rows = [("suite", manifest.suite), ("model", manifest.model), ("strategies", ", ".join(manifest.strategies))]
    if manifest.adapter:        # a tuned model (`rolebound tune`): the adapter merged into it
        rows.insert(2, ("adapter", f"{manifest.adapter.get('path')} (sha {manifest.adapter.get('sha')})"))
    if manifest.scoring:
        rows.append(("scoring", manifest.scoring))
    if manifest.judge:
        rows.append(("judge", manifest.judge))
    for role, url in (getattr(manifest, "endpoints", None) or {}).items():
        rows.append((f"{role} endpoint", url))
    for strat, why in (getattr(manifest, "skipped_strategies", None) or {}).items():
        rows.append(("skipped", f"{strat} skipped: {why}; see {SKIP_DOC}"))
    d = manifest.decoding
    proto = getattr(manifest, "protocol", None) or {}
    if proto.get("label"):
        rows.append(("protocol", papers.protocol_label(manifest)))
    if proto.get("self_judged"):
        rows.append(("judging", "self-judged: the model under test judged its own answers"))
    rows.append(("decoding", f"temperature {d.temperature}, top_p {d.top_p}, max_tokens {d.max_tokens}, seed {d.seed}"))
    jd = getattr(manifest, "judge_decoding", None)
    if jd is not None:
        rows.append(("judge decoding", f"temperature {jd.temperature}, top_p {jd.top_p}, max_tokens {jd.max_tokens}"))
    if manifest.repeats > 1 and proto.get("seeds"):
        rows.append(("repeats", f"{manifest.repeats} (seeds {', '.join(str(x) for x in proto['seeds'])})"))
    ties = (metrics or {}).get("score_ties") or {}
    if ties.get("scored"):
        rows.append(("exact ties", f"{ties['tied']} of {ties['scored']} scored answers tie between their "
                                   "best options (the first listed is recorded; see `tied` in records)"))
    cut = (metrics or {}).get("cut_at_cap") or {}
    if cut.get("cut"):
        n, k, rest = cut["generated"], cut["cut"], cut["generated"] - cut["cut"]
        rows.append(("cut at max_tokens", f"{k} of {n} generated replies ({fmt_pct(100 * k / n)}) stopped at the "
                                          f"token cap; {cut['cut_invalid']} of them read as no answer, against "
                                          f"{cut['invalid'] - cut['cut_invalid']} of the {rest} that ended on their "
                                          "own (by stage: the section below)"))
    rows += [
             ("dataset", f"{manifest.dataset} (sha {manifest.dataset_hash}, {manifest.n_items} items)"),
             ("rolebound", f"{manifest.package_version} (git {manifest.git_revision or 'unknown'})"),
             ("started / finished", f"{manifest.started} / {manifest.finished or 'unfinished'}")]
    if c:
        rows.append(("calls", f"{c.get('model_calls', 0)} model calls, {c.get('cache_hits', 0)} cache hits, "
                              f"{c.get('resumed', 0)} resumed, {c.get('failed_calls', 0)} failed"))
    return rows


def repeats_section(rep: Report, metrics: dict) -> None:
    """Mean +- SEM over repeats of every metric (metrics.json: over_repeats)."""
    reps = metrics.get("over_repeats")
    if not reps or not reps.get("values"):
        return
    rows = [[k, f"{v['mean']:.3f} +- {v['sem']:.3f}", ", ".join(f"{x:.3f}" for x in v["per_repeat"])]
            for k, v in reps["values"].items()][:400]
    rep.table(f"Mean +- SEM over {len(reps['repeats'])} repeats (seeds "
              f"{', '.join(str(x) for x in reps.get('seeds') or reps['repeats'])})",
              ["metric", "mean +- SEM", "per repeat"], rows,
              note="each metric recomputed on one repeat's records; SEM = sample std / sqrt(repeats)")


def position_warning(rep, metrics: dict) -> None:
    """A position-bias warning among the report's facts."""
    warnings = (metrics.get("position_bias") or {}).get("warnings") or []
    if warnings:
        rep.meta.append(("position bias", "WARNING: " + "; ".join(warnings)))


def position_sections(rep, metrics: dict) -> None:
    """The position-bias warning and table: answer and gold shares by option position."""
    pb = metrics.get("position_bias") or {}
    stages = pb.get("stages") or {}
    if not stages:
        return
    rows = []
    for stage, b in stages.items():
        for i, lab in enumerate(b["labels"]):
            rows.append([stage, f"{i + 1} ({lab})", fmt_pct(b["pick_share"][i]), fmt_pct(b["gold_share"][i]),
                         b["picks"][i], b["golds"][i]])
    tests = "; ".join(f"{s}: chi2 {b['chi2']:.1f}, dof {b['dof']}, p {b['p']:.2g}" if b.get("p") is not None
                      else f"{s}: no test (one position only)" for s, b in stages.items())
    if pb.get("warnings"):
        rep.text("\n\n".join("Warning: " + w + "." for w in pb["warnings"]), title="Position bias warning")
    rep.table("Position bias: answers and gold answers by option position",
              ["stage", "position (label)", "answers", "gold", "answers n", "gold n"], rows,
              note=f"Chi-square test of homogeneity (answers vs gold over positions): {tests}. "
                   f"Rule: {pb.get('rule', '')}. Paper-order calls only; invalid answers left out. The shares are "
                   "counts, with no CI; the test takes the answers as independent, so where the design repeats a "
                   "unit (a prompt asked of several characters) its p is smaller than a clustered test's.")


def shift_sections(rep, metrics: dict) -> None:
    """Accuracy and consistency under cyclic shifts of the options (--set permutations)."""
    sh = metrics.get("shifts") or {}
    if not sh:
        return
    rows = []
    for stage, d in sh.items():
        accs = [d["accuracy"][str(k)] for k in range(d["shifts"])]
        rows.append([stage, d["items"]] + [_one(a) for a in accs] + [_one(d["consistency"])])
    k = max(d["shifts"] for d in sh.values())
    heads = ["stage", "items"] + ["paper order" if s == 0 else f"shift {s}" for s in range(k)] + ["consistency"]
    rows = [r + ["-"] * (len(heads) - len(r)) + [d.get("clustered_by", "-"), d["consistency"].get("clusters", "-")]
            for r, d in zip(rows, sh.values())]
    heads += ["clustered by", "clusters"]
    rep.table("Accuracy under cyclic shifts of the options (--set permutations)", heads, rows,
              note="Each item asked with its options shifted cyclically (shift s: the option at position i moves "
                   "to i+s). Consistency: the share of items whose chosen option, by content, is the same under "
                   "every shift. The paper's figure is the paper-order column; items asked under every shift only. "
                   "CIs resample clusters as the headline table does (the suite's declared unit, from the "
                   "paper-order record); under 10 clusters no CI is printed.")


def cut_at_cap(records) -> dict[str, Any]:
    """Generated replies that stopped at the token cap (finish_reason "length": the word of every
    engine here and of the OpenAI API), and how many of them read as no answer, against the replies
    that ended on their own. A reply cut before its answer line reads none however good the reader
    is, so this says how much of an invalid share the cap makes. By stage where any was cut."""
    from ..records import INVALID

    total = {"generated": 0, "cut": 0, "cut_invalid": 0, "invalid": 0}
    stages: dict[str, dict[str, int]] = {}
    for r in records:
        if r.kind == "score" or r.error or r.finish_reason is None:
            continue
        d = stages.setdefault(r.stage, {"generated": 0, "cut": 0, "cut_invalid": 0, "invalid": 0})
        cut, bad = r.finish_reason == "length", r.parsed == INVALID
        for t in (total, d):
            t["generated"] += 1
            t["cut"] += cut
            t["invalid"] += bad
            t["cut_invalid"] += cut and bad
    return {**total, "stages": {k: v for k, v in sorted(stages.items()) if v["cut"]}}


def cap_section(rep, metrics: dict) -> None:
    cut = metrics.get("cut_at_cap") or {}
    if not cut.get("cut"):
        return
    rows = [[stage, d["generated"], d["cut"], d["cut_invalid"], d["invalid"] - d["cut_invalid"],
             d["generated"] - d["cut"]] for stage, d in cut["stages"].items()]
    rep.table("Replies cut at the token cap", ["stage", "generated", "cut at max_tokens", "cut, read as no answer",
                                               "others read as no answer", "others"], rows,
              note="A reply that stops at max_tokens (finish_reason 'length') before its answer line reads as no "
                   "answer (invalid) whatever the reader's rules; compare the two 'read as no answer' columns. "
                   "Stages where no reply was cut are left out.")


def _one(d: dict | None) -> str:
    if not d or d.get("rate") is None:
        return "-"
    if (g := few_clusters(d)) is not None:
        return f"{d['rate']:.1f}% {untrusted(g)}"
    return f"{d['rate']:.1f}% [{d['lo']:.1f}, {d['hi']:.1f}]" if d.get("lo") is not None else f"{d['rate']:.1f}%"


def score_ties(records) -> dict[str, Any]:
    """Scored (log-likelihood) answers whose best option is an exact tie with another."""
    scored = [r for r in records if r.kind == "score" and r.error is None]
    tied = [r.call_id for r in scored if r.tied]
    return {"scored": len(scored), "tied": len(tied),
            "rate": round(100.0 * len(tied) / len(scored), 3) if scored else None, "calls": tied[:50]}


def over_repeats(suite, records, manifest) -> dict[str, Any]:
    """Mean +- SEM over repeats of every number the suite's metrics give per repeat (the papers
    report means over runs): the metrics are recomputed on each repeat's records alone."""
    reps = sorted({r.repeat for r in records})
    try:
        per = [_numbers(suite.metrics([r for r in records if r.repeat == k], manifest)) for k in reps]
    except Exception as exc:  # noqa: BLE001 - one repeat's records may not support every metric
        return {"repeats": reps, "seeds": manifest.protocol.get("seeds"), "values": {},
                "error": f"{type(exc).__name__}: {exc}"}
    keys = [k for k in per[0] if all(k in p for p in per[1:])] if per else []
    out = {}
    for k in keys:
        vals = [p[k] for p in per]
        m, sem = mean_sem(vals)
        out[k] = {"mean": m, "sem": sem, "per_repeat": vals}
    return {"repeats": reps, "seeds": manifest.protocol.get("seeds"), "values": out}


def _numbers(d, prefix: str = "") -> dict[str, float]:
    """Float leaves of a nested metrics dict, by dotted path (ints are counts: left out)."""
    out: dict[str, float] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            if k not in ("se", "se_item", "deff", "mdd"):     # a figure's uncertainty, not a figure
                out.update(_numbers(v, f"{prefix}{k}."))
    elif isinstance(d, float) and d == d:
        out[prefix.rstrip(".")] = d
    return out
