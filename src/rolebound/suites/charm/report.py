"""CHARM report: the paper's tables as the run allows, the matrix and region plots, per-sample rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .card import position_claim, yes_control_text
from .metrics import CELL_LABELS, CELLS, instances
from ...report.fmt import fmt_diff, fmt_pm, fmt_rate, interval
from ...report.builder import Report, drawing, extraction_section, read_by
from ...term import visible

CELL_COLORS = {"consistent": "#4c9f70", "compliance_gap": "#e07b39",
               "incidental_refusal": "#8fb8de", "recognition_failure": "#c0392b"}


def _r(d: dict | None) -> float | None:
    return None if not d else d.get("rate")


def _stacked(labels: list[str], mats: list[dict], title: str):
    """One horizontal stacked bar per boundary type or model: its name on the y axis, however long,
    never drawn over its neighbour's (compare puts many models side by side)."""
    import textwrap

    from ...report.builder import subplots

    names = [textwrap.fill(visible(x, newlines=False), 34) for x in labels]
    lines = sum(n.count("\n") + 1 for n in names)
    fig, ax = subplots(figsize=(7.0, 1.3 + 0.22 * lines + 0.18 * len(names)))
    y = list(range(len(names)))[::-1]           # the first on top
    left = [0.0] * len(names)
    for c in CELLS:
        vals = [(_r(m.get(c)) or 0.0) for m in mats]
        ax.barh(y, vals, left=left, color=CELL_COLORS[c], label=CELL_LABELS[c])
        left = [b + v for b, v in zip(left, vals)]
    ax.set_yticks(y, names)
    ax.set_xlabel("% of instances")
    ax.set_xlim(0, 100)
    ax.set_title(visible(title, newlines=False), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def _region_bars(by_region: dict, title: str):
    from ...report.builder import subplots
    import numpy as np

    regions = list(by_region)
    x = np.arange(len(regions))
    fig, ax = subplots(figsize=(max(5, 1.2 * len(regions) + 2), 3.4))
    for key, dx, label, color in (("c_gap", -0.2, "Compliance Gap (both types)", "#e07b39"),
                                  ("override", 0.2, "Verified override (cross)", "#6c5ce7")):
        vals = [_r(by_region[r][key]) or 0.0 for r in regions]
        ax.bar(x + dx, vals, 0.4, label=label, color=color)
        # an error bar only where the table prints a CI (none under 10 clusters, none of no width)
        for j, r in enumerate(regions):
            lo, hi = interval(by_region[r][key])
            if lo is not None and hi > lo:
                ax.errorbar(x[j] + dx, vals[j], yerr=[[max(0.0, vals[j] - lo)], [max(0.0, hi - vals[j])]],
                            fmt="none", ecolor="#333", capsize=3)
    ax.set_xticks(x, [visible(r, newlines=False) for r in regions])
    ax.set_ylim(0, 100)
    ax.set_ylabel("%")
    ax.set_title(visible(title, newlines=False) + " (95% cluster-bootstrap CI)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)   # off the plot: CIs reach 0 and 100
    fig.tight_layout()
    return fig


def report_sections(metrics: dict, records, manifest, run_dir) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    rep = Report("CHARM: character knowledge boundaries",
                 "Boundary-Awareness (BA) vs Boundary-Compliance (BC); rates in %, 95% bootstrap CI in brackets.")
    _data_section(rep, manifest)
    if metrics.get("dialogue"):         # dialogue probes: their depth table and drift figure first
        from ...dialogue.report import add_sections

        add_sections(rep, metrics["dialogue"])
    if manifest.scoring == "logprob":
        rep.text("Scoring: log-likelihood. BA compares \u201cYes\u201d/\u201cNo\u201d as the reply's first token; "
                 "MCQs compare the option digits after an assistant turn prefilled with \u201cAnswer: \u201d. "
                 "The paper generates a short explanation first (--scoring generate).")
    _matrix_tables(rep, metrics, manifest)
    _override_and_controls(rep, metrics, manifest)
    acc = metrics.get("stage_accuracy", {})
    rows = [[k.split("/")[0].upper(), k.split("/")[1], v["n"], fmt_rate(v), v["invalid"]] for k, v in acc.items()]
    if rows:
        rep.table("Accuracy by question type", ["question", "boundary", "n", "acc", "invalid"], rows,
                  note="invalid = no rule read an answer (see 'readings per rule'); counted as incorrect.")
    rep.table("Table 7: questions answered in this run", *_table7(records))
    strict = (manifest.options or {}).get("extraction") == "strict"
    extraction_section(rep, records, metrics,
                       "The paper's strict reading was used (extraction=strict)." if strict else "")
    rep.samples("Per-sample records", ["character", "region", "stage", "boundary", "target", "gold", "parsed",
                                       "outcome", "BA-BC cell", "read by", "question", "response"], _samples(records),
                ["character", "region", "stage", "boundary", "outcome", "BA-BC cell"],
                shown=["question", "character", "stage", "gold", "parsed", "outcome", "BA-BC cell"])
    return rep


def _data_section(rep: Report, manifest) -> None:
    """An imported release: its commit, what differs from the paper, what is ours; the prompt variant."""
    if (manifest.options or {}).get("prompt") == "authors":
        rep.text("BC and KV questions were asked with the authors' own prompt (their release's "
                 "prompt/mc_eval_template_0-shot.txt, --set prompt=authors), not the paper's Table 20. Their "
                 "template lists choices 1-4 only (the fifth option is dropped); here all five options are shown.",
                 "Prompt")
    p = getattr(manifest, "dataset_provenance", None)
    if not p:
        return
    rows = ([["release", f"{p.get('release')}, {p.get('repo')} commit {p.get('commit') or 'unknown'}"]]
            + [["differs from the paper", d] for d in p.get("differences", [])]
            + [["ours", d] for d in p.get("ours", [])] + [["left out", d] for d in p.get("left_out", [])])
    rep.table("Data: an imported release", ["what", "detail"], rows)


def _matrix_tables(rep: Report, metrics: dict, manifest) -> None:
    """Tables 1, 2, 6 and 9: the BA-BC matrix and where BC goes wrong."""
    acc = metrics.get("stage_accuracy", {})
    mat = metrics.get("matrix", {})
    allm = mat.get("all", {})
    if not allm.get("n"):
        yes_control_table(rep, metrics.get("ba_control") or {})
        return
    rep.table("Table 2: where character hallucination occurs",
              ["model", "BA Acc.", "BC Acc.", "C-Gap", "R-Fail", "instances"],
              [[manifest.model, fmt_rate(acc.get("ba/all")), fmt_rate(acc.get("bc/all")),
                fmt_rate(allm.get("compliance_gap")), fmt_rate(allm.get("recognition_failure")), allm["n"]]],
              note="BA/BC Acc. over all questions asked; C-Gap and R-Fail over paired (role, target) "
                   "instances (Table 1). Invalid answers count as incorrect.")
    yes_control_table(rep, metrics.get("ba_control") or {})
    rows = []
    for b in ("all", "temporal", "cross"):
        m = mat.get(b, {})
        if m.get("n"):
            rows.append([b, m["n"]] + [f"{m[c]['count']} ({fmt_rate(m[c])})" for c in CELLS])
    rep.table("BA-BC matrix (Table 1): counts and rates", ["boundary", "n"] + [CELL_LABELS[c] for c in CELLS],
              rows)
    labels = [b for b in ("temporal", "cross", "all") if mat.get(b, {}).get("n")]
    rep.figure("BA-BC matrix cells", drawing(_stacked, labels, [mat[b] for b in labels],
                                                      f"{manifest.model}: matrix cells by boundary type"), "matrix")
    rep.table("Table 6: Compliance Gap rate by boundary type", ["model", "Cross-Univ.", "Temporal"],
              [[manifest.model, fmt_rate(mat.get("cross", {}).get("compliance_gap")),
                fmt_rate(mat.get("temporal", {}).get("compliance_gap"))]])
    split = metrics.get("bc_false_split", {})
    rows = []
    for b in ("temporal", "cross", "all"):
        s = split.get(b)
        if s and s.get("n_bc_false") is not None:
            for ba_key, label in (("ba_true", "BA=True"), ("ba_false", "BA=False")):
                v = s[ba_key]
                rows.append([b, label, v["factually_correct"], v["other_distractor"], v["invalid"]])
    rep.table("Table 9: BC=False split by the option chosen",
              ["boundary", "BA", "factually correct", "other distractor", "invalid"], rows)


def _override_and_controls(rep: Report, metrics: dict, manifest) -> None:
    """Tables 3/10 (override), 4/18 (regions), 15 (sequential), 16 (no role), 14 (similarity)."""
    ov = metrics.get("override", {})
    if ov.get("n_cross"):
        rep.table("Tables 3 and 10: parametric override (Cross-Universe)",
                  ["model", "# BA+", "# BA+ & FC-BC", "# BA+ & FC-BC & FC-KVQ", "Verified Override"],
                  [[manifest.model, ov["ba_pos"], ov["ba_pos_fc_bc"], ov["ba_pos_fc_bc_fc_kv"], fmt_rate(ov)]],
                  note="Override = #(BA+ & FC-BC & FC-KVQ) / #(BA+ & FC-BC) (Appendix G)."
                       + (f" {ov['missing_kv']} candidates lack a KV answer." if ov.get("missing_kv") else ""))
    override_control_table(rep, metrics.get("override_control") or {})
    reg = metrics.get("by_region", {})
    if reg:
        rep.table("Tables 4/18: by region (this model)", ["region", "C-Gap", "n", "Override", "n (BA+ & FC-BC)"],
                  [[r, fmt_rate(v["c_gap"]), v["n"], fmt_rate(v["override"]), v["n_override"]] for r, v in reg.items()],
                  note="Mean \u00b1 std across models (Table 17) comes from `rolebound compare` over several runs.")
        rep.figure("Compliance Gap and override by region", drawing(_region_bars, reg, manifest.model), "regions")
    seq = metrics.get("sequential", {})
    if seq:
        rows = [[b, v["n"], fmt_rate(v["independent"]), fmt_rate(v["sequential"]),
                 fmt_diff(v.get("paired")) if v.get("paired") else
                 "-" if v["diff"] is None else f"{v['diff']:+.1f}", _p(v.get("paired"))] for b, v in seq.items()]
        rep.table("Table 15: BC accuracy, independent vs sequential BA\u2192BC",
                  ["boundary", "n", "Independent", "Sequential", "Sequential - Independent (pp)", "McNemar p"], rows,
                  note="Independent is '-' unless this run also ran --strategy independent. The difference is paired "
                       "on the questions asked both ways, its CI a cluster bootstrap; McNemar's exact p treats the "
                       "pairs as independent.")
    nr = metrics.get("no_role", {})
    if nr:
        rep.table("Table 16: knowledge under role change (KVQ) and role removal (No-role)",
                  ["model", "n", "KVQ%", "NR% (No-role)", "Both%", "NR% - KVQ% (paired)", "McNemar p",
                   "NR% over all cross BC"],
                  [[manifest.model, nr["n"], fmt_rate(nr["kvq"]), fmt_rate(nr["nr"]), fmt_rate(nr["both"]),
                    fmt_diff(nr.get("nr_minus_kvq")), _p(nr.get("nr_minus_kvq")), fmt_rate(nr["nr_all"])]],
                  note="Over the override candidates (Cross-Universe, BA+ & FC-BC), as in the paper where KVQ% "
                       "equals the Table 3 override rate. 20% is chance for five options. NR% - KVQ%: paired on "
                       "the candidates, CI by cluster bootstrap over targets; McNemar's exact p treats the pairs "
                       "as independent.")
    sim = metrics.get("similarity", {})
    if any(k in sim for k in ("bc", "kv")):
        rows = [[k.upper(), v["n"], v["k"], fmt_rate(v["high"]), fmt_rate(v["low"]), f"{v['gap']:+.1f}"]
                for k, v in sim.items() if k in ("bc", "kv")]
        rep.table("Table 14: accuracy on high- vs low-similarity distractors",
                  ["questions", "n", "items per 20%", "High-sim", "Low-sim", "Gap (High - Low)"], rows,
                  note=f"Cosine between each distractor and the correct answer, averaged per question; "
                       f"embedder: {sim.get('embedder')}. The paper used paraphrase-multilingual-MiniLM-L12-v2. "
                       "CIs clustered as the headline table: BC by fact, else target; KV by fact; within boundary.")


def _p(d: dict | None) -> str:
    """McNemar's exact p of a paired_diff, or '-'."""
    return "-" if not d or d.get("p") is None else f"{d['p']:.2g}"


def yes_control_table(rep: Report, ctl: dict) -> None:
    """The BA Yes control beside BA accuracy: the share of in-boundary questions answered No."""
    if not ctl:
        return
    rep.table("BA Yes control: awareness questions whose answer is Yes",
              ["roles", "questions", "said No", "said Yes", "invalid", "BA questions (answer No): said No"],
              [[ctl["roles"], ctl["n"], fmt_rate(ctl["said_no"]), fmt_rate(ctl["said_yes"]), ctl["invalid"],
                fmt_rate(ctl["ba_said_no"])]],
              note="Control (ours, not in the paper): every BA question's answer is No, so a model that always "
                   "says No scores 100% BA. These ask each historical role, in the paper's BA forms and Table 19 "
                   "prompt, about someone or something of its own era and story (data/ba_control.yaml, "
                   "unvalidated: three for each of the paper's 20 historical roles, asked of those whose BA questions "
                   "ran; --set ba_control=false skips them). The model "
                   + yes_control_text(ctl) + ".")


def override_control_table(rep: Report, ctl: dict) -> None:
    """Verified override with the KV options in the paper's order and in the control order."""
    if not ctl:
        return
    diff = fmt_diff(ctl["paired"]) if ctl.get("paired") else "-" if ctl.get("diff") is None else f"{ctl['diff']:+.1f}"
    rep.table("Verified override under the paper's option order and a control order",
              ["candidates", "paper order", "control order", "control - paper (pp, paired)",
               "control kept the position"],
              [[ctl["n"], fmt_rate(ctl["paper_order"]), fmt_rate(ctl["control_order"]), diff,
                fmt_rate(ctl["same_position"])]],
              note="Control (ours, not in the paper): each override candidate's Knowledge Verification question "
                   "asked again with its options in a fixed, seeded order under which the factual option stands "
                   "neither where it stood in the KV question nor where the factual answer stood in BC "
                   "(--set kv_control=false to skip). A model that answers by content scores alike; one that "
                   "answers by position does not. CIs and the paired difference resample targets within boundary, "
                   "as the override rate does. " + position_claim(ctl) + ".")


def _table7(records):
    counts: dict[str, Counter] = {}
    for r in records:
        if r.role != "model" or r.strategy != "independent" or r.error:
            continue
        col = r.stage.upper() + " " + ("Temp" if r.meta.get("boundary") == "temporal" else "Cross")
        counts.setdefault(r.meta.get("region"), Counter())[col] += 1
    cols = ["BA Temp", "BA Cross", "BC Temp", "BC Cross", "KV Cross"]
    rows = [[reg] + [c[k] for k in cols] + [sum(c[k] for k in cols)] for reg, c in counts.items()]
    if rows:
        rows.append(["Total"] + [sum(r[i] for r in rows) for i in range(1, len(cols) + 2)])
    return ["Region"] + cols + ["Total"], rows


def _samples(records) -> list[dict[str, Any]]:
    cells = {i["bc_id"]: i["cell"] for i in instances(records)}
    out = []
    for r in records:
        if r.role != "model":
            continue
        prompt = r.prompt[-1]["content"] if isinstance(r.prompt, list) and r.prompt else r.prompt
        # one vocabulary for the outcome of every answer; a BC answer's BA-BC cell in its own column
        if r.error:
            outcome = "error"
        else:
            outcome = "correct" if r.correct else ("invalid" if r.parsed == "invalid" else "wrong")
        cell = CELL_LABELS[cells[r.item_id]] if r.stage == "bc" and r.item_id in cells else ""
        q = prompt or ""
        if isinstance(q, str) and "Question: " in q:
            q = q.split("Question: ", 1)[1].split("\n", 1)[0]
        out.append({"_call": r.call_id, "character": r.meta.get("role"), "region": r.meta.get("region"),
                    "stage": f"{r.strategy}:{r.stage}", "boundary": r.meta.get("boundary"),
                    "target": r.meta.get("fact") or r.meta.get("target"), "outcome": outcome, "BA-BC cell": cell,
                    "gold": r.gold,
                    "parsed": r.parsed, "read by": read_by(r), "question": q, "response": r.response if r.error is None else r.error})
    return out


def compare_tables(rep: Report, entries) -> None:
    """`rolebound compare` over charm runs: Tables 2, 3, 6 with one row per model; 17 and 18."""
    from .metrics import across_models

    rows2, rows3, rows6, mats, labels = [], [], [], [], []
    per_model = {}
    for d, m, met in entries:
        label = m.model + ("" if m.scoring is None else f" ({m.scoring})")
        if label in per_model:
            label += f" [{d.name}]"
        per_model[label] = met
        acc, mat, ov = met.get("stage_accuracy", {}), met.get("matrix", {}), met.get("override", {})
        a = mat.get("all", {})
        rows2.append([label, fmt_rate(acc.get("ba/all")), fmt_rate(acc.get("bc/all")),
                      fmt_rate(a.get("compliance_gap")), fmt_rate(a.get("recognition_failure")), a.get("n")])
        rows3.append([label, ov.get("ba_pos"), ov.get("ba_pos_fc_bc"), ov.get("ba_pos_fc_bc_fc_kv"), fmt_rate(ov)])
        rows6.append([label, fmt_rate(mat.get("cross", {}).get("compliance_gap")),
                      fmt_rate(mat.get("temporal", {}).get("compliance_gap"))])
        if a.get("n"):
            mats.append(a)
            labels.append(visible(label, newlines=False))     # a manifest's model name drawn: escaped
    rep.table("Table 2: BA accuracy, BC accuracy, Compliance Gap and Recognition Failure",
              ["model", "BA Acc.", "BC Acc.", "C-Gap", "R-Fail", "instances"], rows2)
    if mats:
        rep.figure("Matrix cells per model", drawing(_stacked, labels, mats, "BA-BC matrix cells"), "matrix_models")
    rep.table("Table 6: Compliance Gap by boundary type", ["model", "Cross-Univ.", "Temporal"], rows6)
    rep.table("Tables 3/10: parametric override", ["model", "# BA+", "# BA+ & FC-BC", "# BA+ & FC-BC & FC-KVQ",
                                                  "Verified Override"], rows3)
    t17 = across_models(per_model)
    rep.table("Table 17: by region, mean \u00b1 std across models",
              ["region", "C-Gap", "n", "Override", "n", "models (C-Gap / Override)"],
              [[r, _across(v["c_gap"], v["models_c_gap"]), v["n"], _across(v["override"], v["models_override"]),
                v["n_override"], f"{v['models_c_gap']} / {v['models_override']}"] for r, v in t17.items()],
              note="A figure only one run has is that run's value, with no spread across models.")
    rows18 = []
    for label, met in per_model.items():
        for reg, v in met.get("by_region", {}).items():
            rows18.append([label, reg, fmt_rate(v["c_gap"]), fmt_rate(v["override"])])
    rep.table("Table 18: model \u00d7 region", ["model", "region", "C-Gap", "Override"], rows18)


def _across(pair: tuple, models: int) -> str:
    """Table 17's mean +- std across models; one model: its value, said to be one run's."""
    if models == 1 and pair[0] is not None:
        return f"{pair[0]:.1f} (one run only)"
    return fmt_pm(pair)


def summary_lines(metrics: dict) -> list[tuple[str, str]]:
    out = single_turn_lines(metrics)
    if metrics.get("dialogue"):         # dialogue probes: each rate by depth and its drift
        from ...dialogue.report import summary_lines as dialogue_lines

        out += dialogue_lines(metrics["dialogue"])
    return out


def single_turn_lines(metrics: dict) -> list[tuple[str, str]]:
    m = metrics.get("matrix", {}).get("all", {})
    nr = metrics.get("no_role") or {}
    nr_line = [("no-role acc % (cross BC, Table 16)", f"{fmt_rate(nr['nr_all'])} (n {nr['nr_all'].get('n', '-')})")] \
        if nr.get("nr_all") else []
    if not m or not m.get("n"):
        return nr_line
    acc = metrics.get("stage_accuracy", {})
    ov = metrics.get("override", {})
    return [("instances (BC paired with BA)", str(m["n"])),
            ("BA acc %", fmt_rate(acc.get("ba/all"))), ("BC acc %", fmt_rate(acc.get("bc/all"))),
            ("Compliance Gap %", fmt_rate(m.get("compliance_gap"))),
            ("Recognition Failure %", fmt_rate(m.get("recognition_failure"))),
            ("verified override %", f"{fmt_rate(ov)} ({ov.get('ba_pos_fc_bc_fc_kv', 0)}/{ov.get('ba_pos_fc_bc', 0)})")] \
        + ([("override, control option order %", fmt_rate(ctl["control_order"]))]
           if (ctl := metrics.get("override_control")) else []) \
        + ([("BA Yes control: said No %", f"{fmt_rate(yc['said_no'])} (n {yc['n']})")]
           if (yc := metrics.get("ba_control")) else []) + nr_line
