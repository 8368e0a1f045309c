"""The knowledge-errors report: Tables 2 and 3 of the paper, judgment validity, method cost,
per-character accuracy, the hidden-state analysis (Figure 4) and the per-answer samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .metrics import ANSWER_STAGE, cosine_distances, tsne_2d
from ...io import open_regular, read_regular
from ...rejudge import rounds_text, verdicts
from ...report.fmt import few_clusters, fmt_diff, fmt_mean_sem, fmt_num, untrusted
from ...report.builder import Report, drawing, extraction_section, read_by
from .data import CATEGORIES, CATEGORY_SHORT, ERROR_TYPES

HIDDEN_FILE = "hidden_states.npz"
JUDGE_SCORING_FACT = {
    "generate": "generate: the judge writes its reply to the Table 14/15 prompt and `judgment: yes|no` is "
                "parsed from it (the paper's protocol)",
    "logprob": "logprob: same Table 14/15 prompt, assistant turn prefilled with \"judgment:\", verdict = the "
               "likelier of \" yes\" and \" no\" (our addition for judges that do not follow the format; "
               "the explanation is skipped)",
}
RETRIEVAL_FILE = "retrieval.json"
METHOD_COLUMNS = (["method"] + [f"KKE {CATEGORY_SHORT[c]}" for c in CATEGORIES] + ["KKE Avg."]
                  + [f"UKE {CATEGORY_SHORT[c]}" for c in CATEGORIES] + ["UKE Avg.", "Avg."])


def method_rows(metrics: dict) -> list[list[str]]:
    """Table 3 layout: one row per method, mean accuracy over repeats."""
    rows = []
    for strat, acc in metrics.get("accuracy", {}).items():
        row = [strat]
        for et in ERROR_TYPES:
            row += [fmt_mean_sem(acc[et][c], False) for c in CATEGORIES] + [fmt_mean_sem(acc[et]["all"], False)]
        rows.append(row + [fmt_mean_sem(acc["overall"], False)])
    return rows


def _facts(rep: Report, metrics: dict, manifest, run_dir: Path) -> None:
    judges = metrics.get("judges") or {}
    modes = metrics.get("judge_scoring") or {}
    rnd = metrics.get("judge_round")
    if rnd is not None:
        rep.facts([("judgments used", rounds_text(judges, rnd, modes))])
        mode = modes.get(str(rnd))
        if mode:
            rep.facts([("judge scoring", JUDGE_SCORING_FACT.get(mode, mode))])
    info_path = run_dir / RETRIEVAL_FILE
    if info_path.exists():
        info = json.loads(read_regular(info_path).decode("utf-8"))
        corpus = info.get("corpus_file") or "none"
        if info.get("corpus_from_items"):
            corpus += f"; item chunks stand in for: {', '.join(info['corpus_from_items'])}"
        rep.facts([("retrieval corpus", corpus), ("few-shot pool", info.get("few_shot_file") or "-")])
        if info.get("embedder"):
            rep.facts([("retrieval encoder", info["embedder"])])


def report_sections(metrics: dict, records: list, manifest, run_dir: Path) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    run_dir = Path(run_dir)
    rep = Report("knowledge-errors: detecting character knowledge errors (KKE / UKE)",
                 "Zhang et al., Revealing the Challenge of Detecting Character Knowledge Errors in LLM Role-Playing")
    _facts(rep, metrics, manifest, run_dir)
    acc = metrics.get("accuracy", {})
    reps = max((len(a.get("repeats", [])) for a in acc.values()), default=0)
    note = (f"Accuracy (%) = answers the judge marked 'yes' / judged answers; invalid judgments count as not "
            f"detected. Mean ± SEM over {reps} repeat(s) (± SEM only with two or more); n: judged answers per repeat.")
    heads = [f"{CATEGORY_SHORT[c][:-1]}-Mem." for c in CATEGORIES] + ["Average"]
    for et, label in (("KKE", "Known Knowledge Errors (KKE)"), ("UKE", "Unknown Knowledge Errors (UKE)")):
        rows = [[s] + [fmt_mean_sem(a[et][c]) for c in CATEGORIES] + [fmt_mean_sem(a[et]["all"]), a[et]["all"]["n"]]
                for s, a in acc.items()]
        rep.table(f"Table 2 layout: {label}, {manifest.model}", ["method"] + heads + ["n"], rows, note=note)
    rep.table("Table 3 layout: methods (accuracy %, mean over repeats)", METHOD_COLUMNS, method_rows(metrics),
              note="Avg. is over all judged answers of the method (the paper's averages weight categories by size).")
    vs = metrics.get("vs_vanilla") or {}
    if vs:
        rep.table("Each method against vanilla, paired (detection %, difference in points)",
                  ["method", "KKE: method - vanilla", "UKE: method - vanilla", "all: method - vanilla",
                   "McNemar p (all)", "answers paired"],
                  [[s, fmt_diff(d["KKE"]), fmt_diff(d["UKE"]), fmt_diff(d["overall"]),
                    "-" if d["overall"].get("p") is None else f"{d['overall']['p']:.2g}", d["overall"]["n"]]
                   for s, d in vs.items()],
                  note="On the answers both methods gave and the judge read (same item and repeat); the CI resamples "
                       "memories (a KKE/UKE pair shares one); McNemar's exact p treats the answers as independent.")

    mode = (metrics.get("judge_scoring") or {}).get(str(metrics.get("judge_round")))
    rows = []
    for s, a in acc.items():
        j = a["judgments"]
        judged = j["answers"] - j["unjudged"]
        rows.append([s, j["answers"], j["yes"], j["no"], j["invalid"],
                     f"{100.0 * j['invalid'] / judged:.1f}" if judged else "-", j["unjudged"]])
    rep.table("Judge outputs", ["method", "answers", "yes", "no", "invalid", "invalid %", "unjudged"], rows,
              note=("invalid: cannot occur with judge_scoring=logprob (the verdict is the likelier of ' yes' "
                    "and ' no'); " if mode == "logprob" else
                    "invalid: no single `judgment: yes|no` in the judge's reply (Tables 14-15 format); ")
                   + "unjudged: the judge call failed (rerun the command to retry).")

    cost = metrics.get("cost", {})
    rows = [[s, c.get("items", 0), fmt_num(c.get("model_calls")), fmt_num(c.get("prompt_tokens"), 0),
             fmt_num(c.get("completion_tokens"), 0), fmt_num(c.get("judge_calls")), fmt_num(c.get("judge_tokens"), 0)]
            for s, c in cost.items()]
    rep.table("Cost per item (and repeat)", ["method", "items", "model calls", "prompt tokens", "completion tokens",
                                             "judge calls", "judge tokens"], rows,
              note="Calls shared by items (the S2RD self-narrative, one per character) are spread over the items.")

    rows = []
    for s, a in acc.items():
        for ch, d in a.get("by_character", {}).items():
            rows.append([ch, s, fmt_mean_sem(d["KKE"]), d["KKE"]["n"],
                         fmt_mean_sem(d["UKE"]), d["UKE"]["n"]])
    rep.table("Accuracy by character", ["character", "method", "KKE", "KKE n", "UKE", "UKE n"], rows)

    s2 = metrics.get("s2rd") or {}
    if s2:
        rep.table("S2RD self-recollection", ["method", "recollection calls", "memories parsed (mean)",
                                             "no memory: retrieved with the question"],
                  [[s, v["recollections"], f"{v['mean_memories']:.2f}", v["fallback_to_query"]] for s, v in s2.items()])

    _hidden_section(rep, run_dir)
    _samples(rep, records, metrics)
    return rep


def _hidden_section(rep: Report, run_dir: Path) -> None:
    path = run_dir / HIDDEN_FILE
    title = "Hidden states of correct, KKE and UKE queries (Figure 4)"
    if not path.exists():
        rep.text("No hidden states in this run: the model's backend cannot return them (only local "
                 "transformers backends can: bundled, hf), or the run used --set hidden_states=false.", title)
        return
    import numpy as np

    with open_regular(path) as fh, np.load(fh, allow_pickle=False) as z:
        vecs, mids = z["vectors"], [str(x) for x in z["memory_id"]]
        kinds, chars = [str(x) for x in z["kind"]], [str(x) for x in z["character"]]
        mode, model = str(z["mode"]), str(z["model"])
    dist = cosine_distances(vecs, mids, kinds, chars)
    rows = [[ch, d["memories"], fmt_num(d["correct_vs_KKE"], 4), fmt_num(d["correct_vs_UKE"], 4)] for ch, d in dist.items()]
    what = "yes/no queries" if mode == "query" else "first-person memory statements (items lack correct_query)"
    rep.table("Mean cosine distance of last-token top-layer states", ["character", "memories",
                                                                      "correct vs KKE", "correct vs UKE"], rows,
              note=f"{model}; inputs: the {what}, each in the vanilla role prompt. The paper's finding: KKE "
                   "queries sit closer to the correct ones than UKE queries.")
    if not [c for c in set(chars) if chars.count(c) >= 3]:
        rep.text("Too few points for a t-SNE plot (need at least 3 per character).", "t-SNE")
    else:
        rep.figure("t-SNE of hidden states per character (green: correct, red: KKE, blue: UKE)",
                   drawing(_tsne_figure, vecs, kinds, chars), name="tsne")


def _tsne_figure(vecs, kinds: list[str], chars: list[str]):
    from ...report.builder import subplots
    import numpy as np

    names = [c for c in dict.fromkeys(chars) if chars.count(c) >= 3]
    ncol = min(2, len(names))           # two panels a row: the figure fits a report's width
    nrow = -(-len(names) // ncol)
    fig, axes = subplots(nrow, ncol, figsize=(4.4 * ncol, 3.8 * nrow), squeeze=False)
    style = {"correct": ("tab:green", "o"), "KKE": ("tab:red", "^"), "UKE": ("tab:blue", "s")}
    for ax, name in zip(axes.flat, names):
        idx = [i for i, c in enumerate(chars) if c == name]
        xy = tsne_2d(np.asarray(vecs)[idx])
        for kind, (color, marker) in style.items():
            sel = [k for k, i in enumerate(idx) if kinds[i] == kind]
            if sel:
                ax.scatter(xy[sel, 0], xy[sel, 1], c=color, marker=marker, s=28, label=kind, alpha=0.8)
        ax.set_title(name, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:                         # beside the panels, off every plot
        fig.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _samples(rep: Report, records: list, metrics: dict) -> None:
    round_ = metrics.get("judge_round")
    judges = {(r.item_id, r.strategy, r.repeat): r for r in verdicts(records, round_)} if round_ is not None else {}
    rows = []
    for r in records:
        if r.stage != ANSWER_STAGE or r.role != "model":
            continue
        j = judges.get((r.item_id, r.strategy, r.repeat))
        rows.append({"_call": r.call_id, "item": r.item_id, "character": r.meta.get("character"), "category": r.meta.get("category"),
                     "error_type": r.meta.get("error_type"), "method": r.strategy, "repeat": r.repeat,
                     "query": r.meta.get("query"), "answer": r.response if r.error is None else f"ERROR: {r.error}",
                     "judgment": (j.parsed if j.error is None else "failed") if j else "-",
                     "read by": read_by(j) if j else "", "judge reply": _judge_reply(j) if j else ""})
    extraction_section(rep, records, metrics)
    rep.samples("Per-answer records", ["item", "character", "category", "error_type", "method", "repeat", "query",
                                       "answer", "judgment", "read by", "judge reply"], rows,
                ["method", "error_type", "category", "character", "judgment"],
                shown=["query", "character", "error_type", "method", "judgment"])


def _judge_reply(j) -> str:
    if j.error is None and j.kind == "score" and j.logprobs:
        return "log-probs: " + ", ".join(f"{c.strip()} {lp:.3f}" for c, lp in zip(j.continuations or [], j.logprobs))
    return j.response or j.error or ""


def summary_lines(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    mode = (metrics.get("judge_scoring") or {}).get(str(metrics.get("judge_round")))
    if mode:
        out.append(("judge scoring", mode))
    for strat, acc in metrics.get("accuracy", {}).items():
        j = acc["judgments"]
        out.append((f"{strat}: KKE / UKE / avg",
                    f"{fmt_mean_sem(acc['KKE']['all'], False)} / {fmt_mean_sem(acc['UKE']['all'], False)} / "
                    f"{fmt_mean_sem(acc['overall'], False)} (invalid judgments {j['invalid']}/{j['answers']})"))
        for key, cell in (("KKE", acc["KKE"]["all"]), ("UKE", acc["UKE"]["all"]), ("avg", acc["overall"])):
            if cell.get("lo") is not None:
                g = few_clusters(cell)
                out.append((f"{strat}: {key} 95% CI", f"{fmt_num(cell['mean'], 1)} " +
                            (untrusted(g) if g is not None else f"[{cell['lo']:.1f}, {cell['hi']:.1f}]")))
    return out


def compare_tables(rep: Report, entries) -> None:
    from .report import method_rows, METHOD_COLUMNS

    rows = []
    for d, m, met in entries:
        for r in method_rows(met):
            rnd = str(met.get("judge_round"))
            judge = (met.get("judges") or {}).get(rnd, "-")
            mode = (met.get("judge_scoring") or {}).get(rnd)
            rows.append([str(d), m.model, f"{judge} ({mode})" if mode else judge] + r)
    rep.table("Methods across runs (Table 3 layout, accuracy %, mean over repeats)",
              ["run", "model", "judge"] + METHOD_COLUMNS, rows)
