"""capability report: Table 3, the per-role and answer-extraction tables, Figures 3, 5 and 6, and
every answer in a filterable table. Built from metrics and records alone."""

from __future__ import annotations

from typing import Any

from .metrics import JUDGE_DIMS, METRICS, answer_records, judge_records, outcome, role_order
from ...rejudge import judge_rounds, rounds_text, verdicts
from ...report.fmt import fmt_diff, fmt_mean_sd
from .boxed import KINDS
from .data import DEFAULT_PER_LEVEL
from ...protocol import is_demo_spec
from ...report.builder import Report, drawing


def report_sections(metrics, records, manifest, run_dir) -> Report:
    """Its part of the run's report (title, own facts, sections); rolebound.report.build adds the
    run-level facts and sections and writes report.md and report.html."""
    m = metrics
    strategies = list(manifest.strategies)
    role_strats = [s for s in strategies if s in m["by_strategy"]]
    rep = Report("capability: role-capability leakage (RoleCapBench)")
    if metrics.get("dialogue"):         # dialogue probes: their depth table and drift figure first
        from ...dialogue.report import add_sections

        add_sections(rep, metrics["dialogue"])
    single = bool(role_strats or m.get("no_role"))     # a dialogue-only run has its tables above
    probes = answer_records(records) or [r for r in records if r.role == "model" and r.stage.startswith("q.")]
    n_q = len({r.item_id for r in probes})
    sample = ""
    if manifest.dataset.startswith("builtin:") and manifest.limit is None and "per_level" not in manifest.options \
            and is_demo_spec(manifest.model):
        sample = (f" (the bundled model's default sample of {DEFAULT_PER_LEVEL} per level; "
                  "--set per_level=all or --limit N runs more)")
    labels = [r["label"] for r in m["roles"]] or [lab for _, lab, _, _ in role_order(probes)]
    rep.text(f"{n_q} questions{sample}; roles: {', '.join(labels) or '-'}. "
             "TA: accuracy on all questions; IA: on questions at or below the role's ceiling; A: above it "
             "(lower A means less leakage). Answers are read only from the last \\boxed{} and must be exactly "
             "A, B, C or D (Appendix D); anything else counts as wrong. "
             + ("Judge: RV, C, RC scored by the judge model." if any(r.role == "judge" for r in records)
                else "Judge: off (--set judge=true scores RV, C, RC)."), title="What was measured")
    if single:
        _single_turn(rep, m, records, role_strats)
    rep.samples("Per-answer records", ["item", "variant", "role", "level", "in_role", "gold", "parsed", "correct",
                                       "boxed", "judge", "response"], _samples(records, probes),
                ["variant", "role", "level", "boxed", "correct"],
                shown=["question", "variant", "role", "level", "gold", "parsed"])
    return rep


def _single_turn(rep: Report, m: dict, records, role_strats: list[str]) -> None:
    """Table 3, per role, extraction, judge, no-role, Figures 3, 5 and 6: the single-turn variants."""
    rows = []
    for strat in role_strats:
        mac = m["by_strategy"][strat]["macro"]
        rows.append([strat] + [fmt_mean_sd(mac[k]["mean"], mac[k]["std"]) for k in METRICS + JUDGE_DIMS])
    if m.get("no_role"):
        rows.append(["no-role", fmt_mean_sd(m["no_role"]["TA"]), "-", "-", "-", "-", "-"])
    rep.table("Table 3: TA, IA, A (0-1) and judge RV, C, RC (0-2), mean (sample std) across roles",
              ["variant", "TA", "IA", "A", "RV", "C", "RC"], rows,
              note="IA averages the roles with an in-role question, A those with an above-role question. "
                   "RV, C, RC are '-' unless the run was judged (--set judge=true).")
    prow = []
    for strat in role_strats:
        for role in m["roles"]:
            pr = m["by_strategy"][strat]["per_role"].get(role["id"])
            if not pr:
                continue
            prow.append([strat, role["label"], role["ceiling"] or "none", pr["n"], fmt_mean_sd(pr["TA"]),
                         f"{fmt_mean_sd(pr['IA'])} (n={pr['n_in']})", f"{fmt_mean_sd(pr['A'])} (n={pr['n_above']})",
                         fmt_mean_sd(pr["RV"]), fmt_mean_sd(pr["C"]), fmt_mean_sd(pr["RC"])])
    rep.table("Per role", ["variant", "role", "ceiling", "n", "TA", "IA", "A", "RV", "C", "RC"], prow)
    orow = []
    for strat in role_strats + (["no-role"] if m.get("no_role") else []):
        oc = m["no_role"]["outcomes"] if strat == "no-role" else m["by_strategy"][strat]["outcomes"]
        orow.append([strat, oc["total"]] + [oc[k] for k in KINDS])
    rep.table("Answer extraction (Appendix D)", ["variant", "answers"] + list(KINDS), orow,
              note="missing: no \\boxed{; unclosed: the last box never closes; idk: the box abstains; "
                   "other: a closed box whose content is not exactly one letter A-D.")
    if any(r.role == "judge" for r in records):
        rounds = judge_rounds(records)
        if len(rounds) > 1:      # re-judged: the metrics use the newest round, the others stay as history
            rep.facts([("judgments used", rounds_text(rounds, max(rounds)))])
        by = {}
        for r in verdicts(records):
            by.setdefault(r.strategy, set()).add(r.model)
        rep.table("Judge calls (RV, C, RC; Table 6)",
                  ["variant", "judge model", "answers judged", "unreadable judge replies"],
                  [[s, ", ".join(sorted(by.get(s, []))) or "-", m["by_strategy"][s]["judged"],
                    m["by_strategy"][s]["judge_invalid"]] for s in role_strats],
                  note="A judge reply without a readable 0-2 score is left out of RV, C, RC, never guessed.")
    if m.get("no_role"):
        nr = m["no_role"]
        rep.table("No-role baseline by level", ["level", "TA"],
                  [[lv["name"], fmt_mean_sd(nr["by_level"].get(lv["id"]))] for lv in m["levels"]])
    if role_strats and m["roles"] and m["levels"]:
        rep.figure("Figure 6: accuracy by level (rows) and role (columns); red outline: above the role's ceiling",
                   drawing(heatmap_figure, m, role_strats), name="heatmap")
        rep.figure("Figure 3: task accuracy by role (dashed: no-role baseline)",
                   drawing(accuracy_by_role_figure, m, role_strats), name="accuracy_by_role")
    if m["deltas"]:
        pd = m.get("deltas_paired") or {}
        rep.table("Figure 5 data: change against identity (macro means)",
                  ["variant", "ΔTA", "ΔIA", "ΔA", "ΔTA paired (pp) [95% CI]", "ΔIA paired", "ΔA paired"],
                  [[s, fmt_mean_sd(d["TA"]), fmt_mean_sd(d["IA"]), fmt_mean_sd(d["A"])]
                   + [fmt_diff((pd.get(s) or {}).get(k)) for k in ("TA", "IA", "A")] for s, d in m["deltas"].items()],
                  note="Paired: the variant's answers against identity's on the same question, role and repeat, in "
                       "points; the CI resamples questions (each is asked under every role).")
        rep.figure("Figure 5: ΔIA and ΔA of each variant against identity", drawing(delta_figure, m), name="deltas")


def _samples(records, answers) -> list[dict]:
    """Every answer (or dialogue probe) with its judge scores, if judged."""
    judged = {r.meta.get("judged"): r for r in judge_records(records)}
    samples = []
    for r in answers:
        j = judged.get(r.call_id)
        js = j.parsed if j is not None and isinstance(j.parsed, dict) else {}
        samples.append({"_call": r.call_id, "item": r.item_id, "variant": r.strategy, "role": r.meta.get("role") or "-",
                        "level": r.meta.get("level"), "in_role": r.meta.get("in_role"),
                        "gold": r.gold, "parsed": r.parsed, "correct": r.correct,
                        "boxed": outcome(r.response),       # the \boxed{} answer's form (valid, missing, ...)
                        "judge": " ".join(f"{k}={js.get(k)}" for k in JUDGE_DIMS) if js else "",
                        "response": r.response})
    return samples


def compare_tables(rep: Report, entries) -> None:
    rows = []
    for d, man, met in entries:
        for strat, m in met.get("by_strategy", {}).items():
            mac = m["macro"]
            rows.append([str(d), man.model, strat] + [fmt_mean_sd(mac[k]["mean"], mac[k]["std"])
                                                      for k in METRICS + JUDGE_DIMS])
        if met.get("no_role"):
            rows.append([str(d), man.model, "no-role", fmt_mean_sd(met["no_role"]["TA"]), "-", "-", "-", "-", "-"])
    rep.table("RoleCapBench Table 3 across runs (mean (std) across roles)",
              ["run", "model", "variant", "TA", "IA", "A", "RV", "C", "RC"], rows)


# -- figures (pure functions of the metrics dict; plotting stays out of metrics.py) --------------------------------------------
ORDER = ["identity", "description", "cot", "guideline", "explicit-idk", "syllabus", "injection",
         "injection-syllabus"]


def color(strategy: str):
    """One colour per variant in every figure."""
    import matplotlib

    i = ORDER.index(strategy) if strategy in ORDER else len(ORDER)
    return matplotlib.colormaps["tab10"](i % 10)


def heatmap_figure(m: dict[str, Any], strategies: list[str]):
    """Figure 6: accuracy by level (rows) and role (columns), above-ceiling cells outlined."""
    from ...report.builder import subplots
    from matplotlib.patches import Rectangle

    roles, levels = m["roles"], m["levels"]
    strats = [s for s in strategies if s in m["by_strategy"]]
    ncols = min(4, len(strats))
    nrows = -(-len(strats) // ncols)
    size = (ncols * (0.8 * len(roles) + 1.4), nrows * (0.55 * len(levels) + 1.6))
    fig, axes = subplots(nrows, ncols, figsize=size, squeeze=False, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(strats):]:
        ax.axis("off")
    im = None
    for ax, strat in zip(flat, strats):
        grid = m["by_strategy"][strat]["grid"]
        data = [[(grid.get(r["id"], {}).get(lv["id"], {}).get("acc")) for r in roles] for lv in levels]
        arr = [[float("nan") if v is None else v for v in row] for row in data]
        im = ax.imshow(arr, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        for i, lv in enumerate(levels):
            for j, r in enumerate(roles):
                cell = grid.get(r["id"], {}).get(lv["id"], {})
                v = cell.get("acc")
                ax.text(j, i, "-" if v is None else f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v is not None and v < 0.6 else "black")
                if cell.get("above"):
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", lw=2.0))
        ax.set_xticks(range(len(roles)), [r["label"] for r in roles], rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(levels)), [lv["name"] for lv in levels], fontsize=8)
        ax.set_title(strat, fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=flat, fraction=0.025, label="task accuracy")
    return fig


def accuracy_by_role_figure(m: dict[str, Any], strategies: list[str]):
    """Figure 3: TA by assigned role per variant; dashed line: the no-role baseline."""
    from ...report.builder import subplots

    roles = m["roles"]
    fig, ax = subplots(figsize=(1.1 * len(roles) + 2.5, 3.6))
    x = list(range(len(roles)))
    for strat in strategies:
        sm = m["by_strategy"].get(strat)
        if not sm:
            continue
        ys = [sm["per_role"].get(r["id"], {}).get("TA") for r in roles]
        ax.plot(x, [float("nan") if y is None else y for y in ys], marker="o", label=strat, color=color(strat))
    if m.get("no_role") and m["no_role"]["TA"] is not None:
        ax.axhline(m["no_role"]["TA"], ls="--", color="gray", label="no-role baseline")
    ax.set_xticks(x, [r["label"] for r in roles], rotation=20)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("task accuracy")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))    # off the plot
    return fig


def delta_figure(m: dict[str, Any]):
    """Figure 5: change in IA (x) and A (y) of each variant relative to Identity."""
    from ...report.builder import subplots

    fig, ax = subplots(figsize=(4.8, 3.8))
    ax.scatter([0], [0], marker="s", color=color("identity"), label="identity")
    for strat, d in m["deltas"].items():
        if d.get("IA") is None or d.get("A") is None:
            continue
        ax.scatter([d["IA"]], [d["A"]], label=strat, color=color(strat))
    ax.axhline(0, color="gray", lw=0.8)
    ax.axvline(0, color="gray", lw=0.8)
    ax.set_xlabel("change in in-role accuracy (ΔIA)")
    ax.set_ylabel("change in above-role accuracy (ΔA)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))    # off the plot
    return fig


def summary_lines(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for strat, m in metrics.get("by_strategy", {}).items():
        mac = m["macro"]
        out.append((strat, f"TA {fmt_mean_sd(mac['TA']['mean'])}  IA {fmt_mean_sd(mac['IA']['mean'])}  "
                           f"A {fmt_mean_sd(mac['A']['mean'])}  (valid boxed answers "
                           f"{m['outcomes']['valid']}/{m['outcomes']['total']})"))
        for k in ("TA", "IA", "A"):
            if mac[k].get("lo") is not None:
                out.append((f"{strat} {k} 95% CI", f"{mac[k]['mean']:.3f} [{mac[k]['lo']:.3f}, {mac[k]['hi']:.3f}]"))
    if metrics.get("no_role"):
        nr = metrics["no_role"]
        out.append(("no-role", f"TA {fmt_mean_sd(nr['TA'])} (valid boxed answers "
                               f"{nr['outcomes']['valid']}/{nr['outcomes']['total']})"))
        if nr.get("lo") is not None:
            out.append(("no-role TA 95% CI", f"{nr['TA']:.3f} [{nr['lo']:.3f}, {nr['hi']:.3f}]"))
    if metrics.get("dialogue"):         # dialogue probes: each rate by depth and its drift
        from ...dialogue.report import summary_lines as dialogue_lines

        out += dialogue_lines(metrics["dialogue"])
    return out
