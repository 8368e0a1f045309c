"""`rolebound card --compare`: several cards side by side, one table per suite, one column per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from ..io import write_text_atomic
from ..store import claim_folder
from ..report.builder import md_escape, md_text
from .build import card_suites
from ..report.fmt import fmt_figure
from .render import _env, demo_note, protocol_summary, read_card


def _heads(cards: list[dict]) -> list[str]:
    heads = []
    for c in cards:
        h = c["model"]
        judges = sorted({s["judge"] for s in c["suites"] if s.get("judge") and s["judge"] != c["model"]})
        if judges:
            h += f" (judge {', '.join(judges)})"
        heads.append(h)
    # the same model twice (another judge or date): tell the columns apart by their card file
    return [h if heads.count(h) == 1 else f"{h} [{c['_path']}]" for h, c in zip(heads, cards)]


def tables(cards: list[dict]) -> list[dict[str, Any]]:
    out = []
    order = card_suites()
    names = [n for n in order if any(s["suite"] == n for c in cards for s in c["suites"])]
    names += sorted({s["suite"] for c in cards for s in c["suites"]} - set(names))
    for name in names:
        per = [next((s for s in c["suites"] if s["suite"] == name), None) for c in cards]
        keys: dict[str, str] = {}
        for s in per:
            for f in (s or {}).get("figures", []):
                keys.setdefault(f["key"], f["label"])
        rows = []
        for key, label in keys.items():
            cells = []
            for s in per:
                f = next((x for x in (s or {}).get("figures", []) if x["key"] == key), None)
                if s is None:
                    cells.append({"value": "-", "note": "this card has no such suite"})
                elif f is None:
                    cells.append({"value": "-", "note": "not among this run's figures"})
                else:
                    shown = fmt_figure(f)
                    cells.append({"value": "-" if f["value"] is None else shown,
                                  "note": f["why"] if f["value"] is None else ""})
            rows.append({"label": label, "cells": cells})
        proto = {"label": "protocol", "cells": [{"value": "-" if s is None else
                                                 s["protocol"] + (", self-judged" if s.get("self_judged") else ""),
                                                 "note": ""} for s in per]}
        title = next((s["title"] for s in per if s), name)
        out.append({"suite": name, "title": title, "rows": [proto] + rows,
                    "findings": [(h, s["finding"]) for h, s in zip(_heads(cards), per) if s and s.get("finding")]})
    return out


def _run_of(card: dict, section: dict | None):
    """(folder, manifest, records) of a card section's run, or None where its folder is gone."""
    from ..records import canonical_order, split_extracted
    from ..store import RunDir, load_records

    if not section or not section.get("run_dir"):
        return None
    for d in (Path(section["run_dir"]), Path(card["_path"]).parent / "runs" / section["suite"]):
        if (d / "manifest.json").is_file() and (d / "records.jsonl").is_file():
            return d, RunDir(d).read_manifest(), split_extracted(canonical_order(load_records(d)))[0]
    return None


def paired_rows(cards: list[dict], suite_name: str) -> list[dict[str, Any]]:
    """Issue 51: each card's run of a suite against the first card's, paired (paired.py): first
    what differs, then B - A per strategy and stage with its CI and McNemar p. Runs over other
    data, or whose folder is gone, say so in their cell."""
    from .. import paired
    from ..report.fmt import fmt_diff
    from ..suites import get_suite

    per = [next((s for s in c["suites"] if s["suite"] == suite_name), None) for c in cards]
    base = _run_of(cards[0], per[0])
    if base is None or len(cards) < 2:
        return []
    suite = get_suite(suite_name)
    pairs: list[dict | str] = []
    for c, s in zip(cards[1:], per[1:]):
        run = _run_of(c, s)
        try:
            pairs.append("no run folder to pair" if run is None else paired.compare_pair(suite, base, run))
        except InputError as exc:
            pairs.append(f"not paired: {exc.detail}")
    rows = [{"label": "paired against the first card: what differs",
             "cells": [{"value": "(the reference)", "note": ""}] +
                      [{"value": p if isinstance(p, str) else "; ".join(paired.lines(p)[2:]), "note": ""}
                       for p in pairs]}]
    keys = sorted({(r["strategy"], r["stage"]) for p in pairs if not isinstance(p, str) for r in p["rows"] if r["n"]})
    for strat, stage in keys:
        cells = [{"value": "(the reference)", "note": ""}]
        for p in pairs:
            r = None if isinstance(p, str) else next((x for x in p["rows"] if (x["strategy"], x["stage"]) ==
                                                      (strat, stage)), None)
            pv = "" if not r or r.get("p") is None else f", McNemar p {r['p']:.2g}"
            cells.append({"value": "-" if not r or not r["n"] else f"{fmt_diff(r)} pp (n {r['n']}{pv})", "note": ""})
        rows.append({"label": f"B - A, {strat}/{stage} accuracy", "cells": cells})
    return rows


def compare_cards(paths: Sequence[str | Path], out: str | Path | None = None) -> list[Path]:
    if len(paths) < 2:
        raise InputError("--compare needs two or more cards (card folders or card.json files)", field="--compare")
    cards = [read_card(p) for p in paths]
    out = claim_folder(Path(out) if out else Path("cards") / "compare", marker="compare.json",
                       what="card comparison")
    out.mkdir(parents=True, exist_ok=True)
    heads = _heads(cards)
    ts = tables(cards)
    for t in ts:        # the paired differences right after the protocol row, before the figures
        t["rows"][1:1] = paired_rows(cards, t["suite"])
    facts = [("protocol", [protocol_summary(c) for c in cards]), ("created", [c.get("created", "") for c in cards]),
             ("card", [c["_path"] for c in cards])]
    demo_models = [c["model"] for c in cards if c.get("demo")]
    demos = [demo_note(next(c for c in cards if c.get("demo")))] if len(demo_models) == 1 else \
        [f"{', '.join(demo_models)} are demo backends (the bundled CPU model in demo settings, or the fake test "
         "stand-in): their figures prove that the pipeline runs end to end, not a result about any model."] \
        if demo_models else []
    title = f"Model cards compared: {len(cards)} models"
    data = {"compare": 1, "cards": [c["_path"] for c in cards], "columns": heads, "tables": ts}
    paths_out = [write_text_atomic(out / "compare.json", json.dumps(data, indent=2, ensure_ascii=False))]
    md = [f"# {md_escape(title)}", ""]
    md += [f"> **Demo only.** {md_text(d)}" for d in demos] + ([""] if demos else [])
    md += ["| | " + " | ".join(md_escape(h) for h in heads) + " |", "|---|" + "---|" * len(heads)]
    md += [f"| {md_escape(k)} | " + " | ".join(md_escape(v) for v in vals) + " |" for k, vals in facts] + [""]
    for t in ts:
        md += [f"## {md_escape(t['title'])}", "", "| figure | " + " | ".join(md_escape(h) for h in heads) + " |",
               "|---|" + "---|" * len(heads)]
        md += [f"| {md_escape(r['label'])} | " + " | ".join(md_escape(c["value"]) for c in r["cells"]) + " |"
               for r in t["rows"]] + [""]
        md += [f"- **{md_escape(h)}:** {md_text(f)}" for h, f in t["findings"]] + [""]
    paths_out.append(write_text_atomic(out / "compare.md", "\n".join(md)))
    html = _env().get_template("card.html.j2").render(compare=True, title=title, columns=[{"head": h} for h in heads],
                                                       facts=facts, tables=ts, demo=" ".join(demos), card={})
    paths_out.append(write_text_atomic(out / "compare.html", html))
    return paths_out
