"""Preference pairs from runs' records (`rolebound data pairs`): what a fix trains on.

Each suite's `pairs` hook turns its records into Drafts: the call a pair comes from, the chosen
and the rejected completion, the rule that made it, and the character the prompt plays (the unit
the held-out split keeps whole). The chosen texts are the suites' own templates (each carries a
`NOTE`), never a model's output. This module knows no suite: it builds TRL's conversational
preference rows (`prompt` as messages, `chosen` and `rejected` as one assistant message each),
splits them by character, and writes them as a Hugging Face dataset (Parquet and a card) and as
JSONL.

The pairs follow the run's scoring. For a scored call (logprob) the prompt ends on the assistant
prefill ("Answer: "): the prefill leaves the prompt and starts both completions, which end on the
scored continuation ("Answer: 1" against "Answer: 3"). For a generated call the completion is the
whole reply (after the prefill, where there was one).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .errors import InputError
from .io import stable_hash, write_text_atomic
from .records import Record, canonical_order, split_extracted
from .store import RunDir, claim_folder, load_records

MARKER = "pairs.json"
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Draft:
    """One pair as a suite makes it. `chosen`/`rejected` continue the prompt after its prefill (if
    any): for a scored call the continuation (an option label such as "1"), for a generated call the
    whole reply (a record's `response` is exactly that)."""

    record: Record
    chosen: str
    rejected: str
    rule: str
    character: str
    stratum: str = ""           # held-out characters are drawn within each stratum (CHARM: region)


def prompt_and_prefill(rec: Record) -> tuple[list[dict], str]:
    """The prompt as messages without a trailing assistant turn, and that turn's text (the prefill)."""
    if not isinstance(rec.prompt, list) or not rec.prompt:
        raise ValueError("not a chat prompt")
    msgs = [{"role": m["role"], "content": m["content"]} if isinstance(m, dict) else
            {"role": m.role, "content": m.content} for m in rec.prompt]
    if msgs[-1]["role"] == "assistant":
        return msgs[:-1], msgs[-1]["content"]
    return msgs, ""


def chat_prompt(rec: Record) -> bool:
    """Whether a record's prompt is a list of messages (a raw text prompt, e.g. a rendered chat
    template with a prefilled turn, has no place in the conversational format)."""
    return isinstance(rec.prompt, list) and bool(rec.prompt)


def run_records(run_dir: str | Path) -> tuple[Any, list[Record]]:
    """(manifest, the run's own records in canonical order): no --extractor readings."""
    manifest = RunDir(run_dir).read_manifest()
    return manifest, split_extracted(canonical_order(load_records(run_dir)))[0]


def build(run_dirs: Sequence[str | Path]) -> tuple[list[dict], list[dict], dict[str, int]]:
    """(rows, runs, skipped): every run's pairs as TRL rows with their provenance."""
    from .suites import get_suite

    if not run_dirs:
        raise InputError("give one or more run folders", field="RUN_DIRS")
    rows: list[dict] = []
    runs: list[dict] = []
    skipped: dict[str, int] = {}
    for d in run_dirs:
        manifest, records = run_records(d)
        suite = get_suite(manifest.suite)
        drafts, skip = suite.pairs(records, manifest)
        for k, v in skip.items():
            skipped[k] = skipped.get(k, 0) + v
        name = Path(d).resolve().name
        runs.append({"run": name, "suite": manifest.suite, "model": manifest.model,
                     "dataset_hash": manifest.dataset_hash, "scoring": manifest.scoring, "pairs": len(drafts)})
        for dr in drafts:
            msgs, prefill = prompt_and_prefill(dr.record)
            chosen, rejected = prefill + dr.chosen, prefill + dr.rejected
            if chosen == rejected:
                skipped["chosen equals rejected"] = skipped.get("chosen equals rejected", 0) + 1
                continue
            rows.append({"prompt": msgs,
                         "chosen": [{"role": "assistant", "content": chosen}],
                         "rejected": [{"role": "assistant", "content": rejected}],
                         "suite": manifest.suite, "run": name, "model": manifest.model,
                         "item_id": dr.record.item_id, "call_id": dr.record.call_id, "repeat": dr.record.repeat,
                         "rule": dr.rule, "character": dr.character, "stratum": dr.stratum})
    return rows, runs, skipped


def heldout_characters(rows: list[dict], fraction: float, seed: int) -> set[str]:
    """Whole characters for the test split: round(fraction x n) of each stratum's characters (at
    least one where fraction > 0 and the stratum has two or more; never all of them), seeded.
    A stratum with one character sends it to test with probability `fraction`."""
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"must be at least 0 and below 1, not {fraction}", field="--heldout")
    strata: dict[str, set[str]] = {}
    for r in rows:
        strata.setdefault(r["stratum"], set()).add(r["character"])
    rng = random.Random(seed)
    out: set[str] = set()
    for stratum in sorted(strata):
        chars = sorted(strata[stratum])
        if fraction == 0:
            continue
        if len(chars) == 1:
            if rng.random() < fraction:
                out.update(chars)
            continue
        k = min(len(chars) - 1, max(1, round(fraction * len(chars))))
        out.update(rng.sample(chars, k))
    return out


def _card(meta: dict) -> str:
    import yaml

    from .report.builder import md_escape as e

    header = {"configs": [{"config_name": "default",
                           "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in SPLITS
                                          if meta["counts"][s]]}],
              "license": "other", "language": ["en"], "task_categories": ["text-generation"],
              "pretty_name": "rolebound preference pairs", "tags": ["role-playing", "rolebound", "dpo"]}
    lines = ["---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
             "# rolebound preference pairs", "",
             "Pairs in TRL's conversational preference format (`prompt`, `chosen`, `rejected`), made by "
             "`rolebound data pairs` from the records of the runs below. The chosen texts are rolebound's own "
             "templates (each suite's pairs.py), not a model's output; the rejected texts are the models' "
             "replies, or an abstention where the pair keeps knowledge the character has. "
             "Unvalidated: no review has read these pairs.", "",
             "| run | suite | model | dataset hash | scoring | pairs |", "|---|---|---|---|---|---|"]
    for r in meta["runs"]:
        lines.append(f"| {e(r['run'])} | {e(r['suite'])} | {e(r['model'])} | {e(r['dataset_hash'])} "
                     f"| {e(r['scoring'] or '-')} | {r['pairs']} |")
    lines += ["", f"Held out: {meta['heldout']:g} of the characters of each stratum (seed {meta['seed']}), whole, "
                  f"so that a fix is measured on characters it never trained on.", "",
              f"- train: {meta['counts']['train']} pairs, {len(meta['characters']['train'])} characters",
              f"- test: {meta['counts']['test']} pairs, {len(meta['characters']['test'])} characters: "
              + (e(", ".join(meta["characters"]["test"])) or "none"), "",
              "| rule | pairs |", "|---|---|"]
    lines += [f"| {e(k)} | {v} |" for k, v in sorted(meta["rules"].items())]
    if meta["skipped"]:
        lines += ["", "Calls that made no pair:", ""] + [f"- {e(k)}: {v}" for k, v in sorted(meta["skipped"].items())]
    lines += ["", f"Pairs hash: {meta['hash']}.", ""]
    return "\n".join(lines)


def write(out: str | Path, rows: list[dict], runs: list[dict], skipped: dict[str, int], *, heldout: float,
          seed: int) -> dict:
    """The pairs under `out`: data/{train,test}-00000-of-00001.parquet, {train,test}.jsonl, README.md
    (the card) and pairs.json (what made them); returns pairs.json's content."""
    from .hub import _pyarrow

    out = Path(out)
    test_chars = heldout_characters(rows, heldout, seed)
    split_rows = {"train": [r for r in rows if r["character"] not in test_chars],
                  "test": [r for r in rows if r["character"] in test_chars]}
    for s in SPLITS:
        for r in split_rows[s]:
            r["split"] = s
    rules: dict[str, int] = {}
    for r in rows:
        rules[r["rule"]] = rules.get(r["rule"], 0) + 1
    meta = {"runs": runs, "heldout": heldout, "seed": seed,
            "counts": {s: len(split_rows[s]) for s in SPLITS},
            "characters": {s: sorted({r["character"] for r in split_rows[s]}) for s in SPLITS},
            "rules": rules, "skipped": skipped, "hash": stable_hash(rows)}
    pa, pq = _pyarrow()
    claim_folder(out, marker=MARKER, what="pairs")
    (out / "data").mkdir(parents=True, exist_ok=True)
    for s in SPLITS:
        path = out / "data" / f"{s}-00000-of-00001.parquet"
        jsonl = out / f"{s}.jsonl"
        if split_rows[s]:
            pq.write_table(pa.Table.from_pylist(split_rows[s]), path)
        else:
            path.unlink(missing_ok=True)
        write_text_atomic(jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in split_rows[s]))
    write_text_atomic(out / "README.md", _card(meta))
    write_text_atomic(out / MARKER, json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return meta
