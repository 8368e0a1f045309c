"""Beyond One World report: the paper's tables as the run allows (Tables 3, 6, 7, 9, 11), the
thinking/acting figure, per-call samples, the end-of-run summary and the `rolebound compare` table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...report.fmt import MIN_CLUSTERS, fmt_diff, fmt_mean_n, fmt_num, fmt_rate, untrusted
from .prompts import CONFLICTS
from .data import PHASES
from ...report.builder import Report, drawing, extraction_section, read_by


def report_sections(metrics: dict[str, Any], records: list, manifest, run_dir: Path) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    rep = Report("Beyond One World (multiverse): canon events, dilemmas, cross-version",
                 "Rates in %, 95% cluster-bootstrap CIs in brackets; differences in percentage points. "
                 + CLUSTERED)
    if metrics.get("dialogue"):         # dialogue probes: their depth table and drift figure first
        from ...dialogue.report import add_sections

        add_sections(rep, metrics["dialogue"])
    strat = metrics.get("strategies", {})
    _notes(rep, records, manifest)
    canon_rows, dil_rows, wt_rows, an_rows = _task_rows(strat)
    _task_tables(rep, canon_rows, dil_rows)
    _cot_and_cross(rep, metrics)
    _f1_and_analysis(rep, strat, wt_rows, an_rows)
    _samples(rep, records, metrics)
    return rep


# what every CI here resamples (MultiverseSuite.clusters, in words as the headline table names it)
CLUSTERED = ("Every CI and paired difference resamples clusters, as the headline table: a dilemma by "
             "version+conflict (its iterations and the heroes' other questions of that type), a canon question "
             f"by hero. Under {MIN_CLUSTERS} clusters no CI is printed: it could not be trusted.")


def _f1_ci(ci: list, g: int | None) -> str:
    if g is not None and g < MIN_CLUSTERS:
        return untrusted(g)
    return f"[{fmt_num(ci[0], 1)}, {fmt_num(ci[1], 1)}]"


def _notes(rep: Report, records: list, manifest) -> None:
    notes = ["Unparseable answers, segmentations and judge replies are counted as invalid (wrong for accuracy), never guessed."]
    from ...scoring.embeddings import MPNET_HINT, MPNET_NAME

    used = sorted({r.meta.get("embedder") for r in records if r.stage == "segment" and r.meta.get("embedder")})
    if used and used != [MPNET_NAME]:
        notes.append(f"Think-Act Matching embedded with {', '.join(used)}: a fallback, not the paper's "
                     f"all-mpnet-base-v2 (install its parts: {MPNET_HINT}).")
    if manifest.scoring == "logprob":
        notes.append("Scoring is logprob: the chosen letter is the most likely one after \"Answer:\" (for CoT, after "
                     "the generated reasoning). Direct answers then have no text, so thinking/acting analysis "
                     "covers the CoT replies only.")
    if manifest.options.get("judge_scoring") == "logprob":
        notes.append("Judge scores are read by log-likelihood (judge_scoring=logprob, our addition): the most "
                     "likely digit 0-5 opens the judge's reply, then the most likely digit after \"t,\"; the "
                     "paper's judge writes its scores.")
    rep.text("\n\n".join(notes), "How to read this")


def _task_rows(strat: dict) -> tuple[list, list, list, list]:
    """Rows of the canon, dilemma, F1 and analysis tables, one per strategy (and task)."""
    canon_rows, dil_rows, wt_rows, an_rows = [], [], [], []
    for s, block in strat.items():
        c = block.get("canon")
        if c:
            a = c.get("analysis") or {}
            w = c.get("weighted") or {}
            parts = c.get("by_part", {})
            canon_rows.append([s, c["n"], c["invalid"], fmt_rate(c["acc"]), fmt_num(w.get("precision"), 1),
                               fmt_num(w.get("recall"), 1), fmt_num(w.get("f1"), 1),
                               fmt_num((c.get("macro") or {}).get("f1"), 1), fmt_mean_n(a.get("judge_thinking")),
                               fmt_mean_n(a.get("judge_acting")), fmt_mean_n(a.get("tam"), 3)]
                              + [fmt_rate(c["by_phase"].get(p)) for p in PHASES]
                              + [fmt_rate(parts.get(f"hero{k}")) for k in (1, 2, 3)])
        d = block.get("dilemma")
        if d:
            a = d.get("analysis") or {}
            w = d.get("weighted") or {}
            dil_rows.append([s, d["n"], d["labelled"], d["invalid"], fmt_rate(d["acc"]), fmt_num(w.get("precision"), 1),
                             fmt_num(w.get("recall"), 1), fmt_num(w.get("f1"), 1),
                             fmt_num((d.get("macro") or {}).get("f1"), 1),
                             fmt_rate(d["choice_share"].get("A")), fmt_mean_n(a.get("judge_thinking")),
                             fmt_mean_n(a.get("judge_acting")), fmt_mean_n(a.get("tam"), 3)]
                            + [fmt_rate(d["by_conflict"].get(k)) + " / " + fmt_rate(d.get("first_pole_share", {}).get(k))
                               for k in CONFLICTS])
        for task in ("canon", "dilemma"):
            b = block.get(task)
            if not b:
                continue
            m = b.get("macro") or {}
            ci = b.get("macro_f1_ci") or [None, None]
            wci = b.get("weighted_f1_ci") or [None, None]
            g = b.get("f1_clusters")
            wt_rows.append([s, task, fmt_num((b.get("weighted") or {}).get("f1"), 1), _f1_ci(wci, g),
                            fmt_num(m.get("precision"), 1), fmt_num(m.get("recall"), 1), fmt_num(m.get("f1"), 1),
                            _f1_ci(ci, g), "-" if g is None else g])
            a = b.get("analysis")
            if a:
                top = a.get("judge_top")
                an_rows.append([s, task, a["segment_calls"], a["segment_invalid"], a["tam"]["n"],
                                a.get("rules_tried", 0), a.get("rules_invalid", 0), fmt_mean_n(a.get("tam_rules"), 3),
                                a.get("judge_scoring") or "-", a["judge_calls"], a["judge_invalid"],
                                f"{top['pair']} ({top['n']})" if top else "-", a.get("embedder") or "-"])
    return canon_rows, dil_rows, wt_rows, an_rows


def _task_tables(rep: Report, canon_rows: list, dil_rows: list) -> None:
    if canon_rows:
        rep.table("Canon events (Table 6)",
                  ["strategy", "n", "invalid", "Acc", "Prec", "Recall", "F1", "macro F1", "Judge think",
                   "Judge act", "TAM", "Childhood", "Pre-hero", "Hero", "Hero1", "Hero2", "Hero3"], canon_rows,
                  note="Prec/Recall/F1: weighted by gold support over the letters A-D, as in the paper (its Recall "
                       "equals Acc); macro F1 beside them. Judge scores 0-5; TAM: Think-Act Matching cosine "
                       "over the LLM segmenter's spans.")
    if dil_rows:
        rep.table("Moral dilemmas (Table 7)",
                  ["strategy", "n", "with gold", "invalid", "Acc (gold only)", "Prec", "Recall", "F1", "macro F1",
                   "chose A (first pole)",
                   "Judge think", "Judge act", "TAM"] + [f"{k}: acc / chose A" for k in CONFLICTS], dil_rows,
                  note="Prec/Recall/F1 weighted, as in the paper; macro F1 beside them. "
                       "Accuracy needs a canonical choice; dilemmas without one count only in the choice shares. "
                       "A is the conflict's first pole (Save the One You Love, Hero, Duty, The Ends Justify the Means).")


def _cot_and_cross(rep: Report, metrics: dict) -> None:
    cmd = metrics.get("cot_minus_direct") or {}
    rows = [[t, (v["acc"] or {}).get("n", "-"), fmt_diff(v.get("acc")), fmt_diff(v.get("weighted_f1")),
             fmt_diff(v.get("macro_f1")), fmt_diff(v.get("tam"), 3), fmt_diff(v.get("tam_rules"), 3)]
            for t, v in cmd.items() if v]
    if rows:
        rep.table("CoT minus direct (Table 3)", ["task", "paired items", "Δ Acc", "Δ F1", "Δ macro F1", "Δ TAM",
                  "Δ TAM (rule segments, ours)"], rows,
                  note="Paired over the items both strategies answered; Δ TAM needs analysed replies from both.")
    xrows, prow = [], []
    for s, tasks in (metrics.get("cross") or {}).items():
        for t, b in tasks.items():
            if not b:
                continue
            dfr = b["differs"]
            xrows.append([s, t, b["n"], b["invalid"], fmt_rate(b["acc"]), fmt_rate(b.get("in_version")),
                          fmt_rate(b.get("cross_same_items")), fmt_diff(b.get("drop")), dfr["n"],
                          fmt_rate(dfr["asked_version"]), fmt_rate(dfr["played_version"]), dfr["other"], dfr["invalid"]])
            for p in b["by_pair"]:
                prow.append([s, t, p["hero"], p["played"], p["asked"], p["n"], fmt_rate(p)])
    if xrows:
        rep.table("Cross-version (Tables 9, 11)",
                  ["strategy", "task", "answers", "invalid", "cross Acc", "in-version Acc (same Qs)",
                   "cross Acc (same Qs)", "drop", "versions differ", "gave asked version's answer",
                   "gave played version's answer", "other", "invalid "], xrows,
                  note="The model plays another version of the hero and answers this version's question. drop = "
                       "in-version minus cross accuracy on the questions both strategies answered. 'versions differ': "
                       "the played version has the same question (same key and options) with another answer, or "
                       "(dilemmas) its own canonical choice of that conflict type differs.")
        rep.table("Cross-version accuracy by played and asked version", ["strategy", "task", "hero", "played",
                  "asked", "n", "Acc"], prow,
                  note="A canon pair is one hero, one cluster: its accuracy has no CI. " + CLUSTERED)


def _f1_and_analysis(rep: Report, strat: dict, wt_rows: list, an_rows: list) -> None:
    if wt_rows:
        rep.table("F1 CIs and macro averages", ["strategy", "task", "F1 (weighted)", "F1 CI",
                  "macro Prec", "macro Recall", "macro F1", "macro F1 CI", "clusters"], wt_rows,
                  note="The paper's Recall column equals its accuracy, which is what weighted averaging gives; "
                       "macro averages weigh every letter alike. CIs: percentile bootstrap over clusters "
                       "(a dilemma's version+conflict, a canon question's hero).")
    if an_rows:
        rep.table("Reasoning analysis calls", ["strategy", "task", "segmenter calls", "LLM segmenter invalid",
                  "TAM values (LLM)", "rule fallback tried", "rule fallback invalid", "TAM (rule segments, ours)",
                  "judge scoring", "judge calls", "judge invalid", "most common score pair", "embedder"], an_rows,
                  note="TAM in the tables above uses the LLM segmenter only (the paper's method). Where its reply "
                       "had no valid <thinking>/<acting> pair and segment_fallback=rules, a rule-based segmenter "
                       "(ours: answer-stating sentences are acting, the rest thinking) split the reply; its TAM is "
                       "shown only in the columns marked 'rule segments, ours'. judge scoring logprob (ours): the "
                       "likeliest digit 0-5, then the likeliest after 't,'; generate: the paper's written 't,a'.")
        _think_act_figure(rep, strat)


def _samples(rep: Report, records: list, metrics: dict) -> None:
    samples = []
    for r in records:
        if r.error is not None:
            continue
        group = r.meta.get("phase") or r.meta.get("conflict")
        parsed = r.parsed
        if isinstance(parsed, dict):
            parsed = (f"{parsed.get('segmenter', 'llm')} segments: tam {parsed['tam']:.3f}, {parsed['pairs']} pair(s)"
                      if "tam" in parsed
                      else f"think {parsed.get('thinking')}, act {parsed.get('acting')}")
        samples.append({"id": r.item_id, "strategy": r.strategy, "stage": r.stage, "task": r.meta.get("task"),
                        "version": r.meta.get("version"), "played": r.meta.get("played"), "group": group,
                        "gold": r.gold, "parsed": parsed, "read by": read_by(r), "correct": r.correct,
                        "response": r.response, "_call": r.call_id})
    extraction_section(rep, records, metrics)
    rep.samples("Per-call records", ["id", "strategy", "stage", "task", "version", "played", "group", "gold",
                                     "parsed", "read by", "correct", "response"], samples, ["strategy", "stage", "task", "correct"],
                shown=["question", "version", "strategy", "stage", "task", "gold", "parsed"])


def _think_act_figure(rep, strat: dict) -> None:
    pts = []
    for s, block in strat.items():
        for t, b in block.items():
            a = b.get("analysis") or {}
            th, ac = a.get("judge_thinking", {}).get("mean"), a.get("judge_acting", {}).get("mean")
            if th is not None and ac is not None:
                pts.append((f"{s}/{t} (n={a['judge_thinking']['n']})", th, ac))
    if pts:
        rep.figure("Thinking vs acting (Figure 4)", drawing(think_act_figure, pts), name="think_act")


def think_act_figure(pts: list):
    from ...report.builder import subplots

    fig, ax = subplots(figsize=(6.5, 4))
    markers = "osD^vP*X"
    for i, (label, th, ac) in enumerate(pts):     # a legend, not labels by the points: points sit close
        ax.scatter([th], [ac], marker=markers[i % len(markers)], s=40, label=label)
    ax.set_xlim(0, 5)
    ax.set_ylim(0, 5)
    ax.set_xlabel("judge thinking score (0-5)")
    ax.set_ylabel("judge acting score (0-5)")
    if pts:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def summary_lines(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for s, block in metrics.get("strategies", {}).items():
        for t, b in block.items():
            out.append((f"{s} {t} accuracy", f"{fmt_rate(b['acc'])} ({b['invalid']} invalid of {b['n']})"))
            out.append((f"{s} {t} F1 (weighted)", fmt_num((b.get("weighted") or {}).get("f1"), 1)))
    for s, tasks in (metrics.get("cross") or {}).items():
        for t, b in tasks.items():
            if b and b.get("drop"):
                out.append((f"{s} {t} drop", fmt_diff(b["drop"])))
    if metrics.get("dialogue"):         # dialogue probes: each rate by depth and its drift
        from ...dialogue.report import summary_lines as dialogue_lines

        out += dialogue_lines(metrics["dialogue"])
    return out


def compare_tables(rep: Report, entries) -> None:
    """`rolebound compare`: one row per run, strategy and task."""
    rows = []
    for run_dir, m, met in entries:
        for strat, block in met.get("strategies", {}).items():
            for task, b in block.items():
                a = b.get("analysis") or {}
                x = ((met.get("cross") or {}).get(strat) or {}).get(task) or {}
                rows.append([str(run_dir), m.model, strat, task, b["n"], b["invalid"], fmt_rate(b["acc"]),
                             fmt_num((b.get("weighted") or {}).get("f1"), 1),
                             fmt_num((b.get("macro") or {}).get("f1"), 1), fmt_mean_n(a.get("tam"), 3),
                             fmt_mean_n(a.get("judge_thinking")), fmt_mean_n(a.get("judge_acting")), fmt_diff(x.get("drop"))])
    rep.table("Runs side by side", ["run", "model", "strategy", "task", "n", "invalid", "Acc", "F1", "macro F1", "TAM",
                                    "Judge think", "Judge act", "cross drop"], rows)
