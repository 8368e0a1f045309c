"""CHARM construction pipeline (Appendix I, K; Tables 21, 22, 13).

    seeds (characters, concepts and facts with a question and its correct answer)
      -> two-stage distractor generation with any model (Table 21)
      -> near-duplicate distractors removed by embedding similarity
      -> a complete data file (loadable with `--data`) + a review sheet (CSV, Table 22 criteria)
    two filled review sheets -> Cohen's kappa per region (Table 13) -> only accepted items kept

Generator calls go through the normal run machinery, so they are recorded, cached and resumable.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from pydantic import Field, model_validator

from ...errors import InputError
from ...io import (atomic_path, check_output_file, read_csv_rows, read_yaml, refuse_filled_sheet, validate_yaml,
                   write_text_atomic)
from ...records import Decoding, Message
from .data import CharmData, Concept, Fact

# Table 21, first stage.
STAGE1 = ("You are an uncertainty benchmark generator. Your task is to generate four incorrect answers that are "
          "similar to the correct answer. Requirements: You must be 100% certain that each generated answer is "
          "factually incorrect. Start from the correct answer and create four alternative answers by making minimal "
          "edits (up to 15 words). Each answer must be plausible but clearly wrong. The question is directed to "
          "{profile}, and the answer should be written as if {profile} himself is responding. Please return only "
          "the incorrect answers in the following format:\n"
          "Incorrect Answer 1: [text]\nIncorrect Answer 2: [text]\nIncorrect Answer 3: [text]\n"
          "Incorrect Answer 4: [text]\n"
          "Now generate four incorrect answers for the following question.\n"
          "Question: {question}\nCorrect answer: {answer}")
# Table 21, second stage.
STAGE2 = ("You are an uncertainty benchmark generator. Your task is to generate four additional incorrect answers "
          "that do not overlap with the given four incorrect answers. Requirements: You must be 100% certain each "
          "new answer is factually incorrect. All answers must be plausible but incorrect. Each of the four new "
          "incorrect answers (Incorrect Answer 5 to 8) must use entirely different sentence structures from "
          "Incorrect Answers 1 to 4, avoiding similarity in syntax, phrase order, or grammatical patterns to ensure "
          "maximum variety and distinctiveness. The question is directed to {profile}, and the answer should be "
          "written as if {profile} himself is responding. Please return only the new incorrect answers in the "
          "following format:\n"
          "Incorrect Answer 5: [text]\nIncorrect Answer 6: [text]\nIncorrect Answer 7: [text]\n"
          "Incorrect Answer 8: [text]\n"
          "Now generate new incorrect answers that do not overlap with the following:\n"
          "Question: {question}\nCorrect answer: {answer}\n"
          "Incorrect answer1: {i1}\nIncorrect answer2: {i2}\nIncorrect answer3: {i3}\nIncorrect answer4: {i4}")
# Concept questions are not about one character; their stage prompts address a present-day person.
CONCEPT_PROFILE = "a person living in the present day"
# Table 22.
CRITERIA = [
    ("criterion_1", "the correct answer is the most appropriate and accurate response (1) or not (0)"),
    ("criterion_2", "no incorrect answer could be mistaken for correct (1), else 0"),
    ("criterion_3", "no overlap in meaning among the incorrect answers (1), else 0"),
    ("criterion_4", "all answers are relevant to the question (1), else 0"),
]
_LINE = re.compile(r"incorrect\s*answer\s*(\d+)\s*[:：]\s*(.+)", re.IGNORECASE)


def parse_incorrect(text: str | None, numbers: range) -> list[str]:
    """'Incorrect Answer k: text' lines for k in `numbers`, in order; brackets and markdown stripped."""
    found: dict[int, str] = {}
    for line in (text or "").splitlines():
        m = _LINE.search(line.replace("*", ""))
        if not m:
            continue
        k, val = int(m.group(1)), m.group(2).strip().strip("[]").strip()
        if val.lower() in ("text", "[text]", "..."):
            continue   # the template's placeholder parroted back: not an answer
        if k in numbers and val and k not in found:
            found[k] = val
    return [found[k] for k in numbers if k in found]


class SeedConcept(Concept):
    distractors: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self):
        return self


class SeedFact(Fact):
    distractors: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self):
        return self


class SeedData(CharmData):
    concepts: list[SeedConcept] = Field(default_factory=list)
    facts: list[SeedFact] = Field(default_factory=list)


@dataclass
class BuildStats:
    questions: int = 0
    kept_given: int = 0            # already had 3 distractors
    generated: int = 0             # candidates parsed from the generator
    unparsed_replies: int = 0      # replies with no 'Incorrect Answer k:' line
    near_duplicates: int = 0       # candidates dropped by similarity
    complete: int = 0              # questions with 3 distractors after the pipeline
    incomplete: list[str] = field(default_factory=list)


def pick_distractors(answer: str, stage1: list[str], stage2: list[str], embed, threshold: float,
                     stats: BuildStats, n: int = 3) -> list[str]:
    """Alternate stage-1 (minimal edits, plausible) and stage-2 (different structure) candidates,
    dropping any whose cosine to the answer or to a kept candidate reaches `threshold`."""
    order = [x for pair in itertools.zip_longest(stage1, stage2) for x in pair if x]
    kept: list[str] = []
    seen = {answer.strip().lower()}
    for cand in order:
        key = cand.strip().lower()
        if key in seen:
            stats.near_duplicates += 1
            continue
        vecs = embed([answer] + kept + [cand])
        sims = vecs[:-1] @ vecs[-1]
        if float(sims.max()) >= threshold:
            stats.near_duplicates += 1
            continue
        kept.append(cand)
        seen.add(key)
        if len(kept) == n:
            break
    return kept


async def _generate_one(ctx, question: str, answer: str, profile: str) -> tuple[list[str], list[str]]:
    r1 = await ctx.chat("stage1", [Message(role="user", content=STAGE1.format(
        profile=profile, question=question, answer=answer))], role="generator")
    s1 = parse_incorrect(r1.response, range(1, 5))
    pad = s1 + ["-"] * (4 - len(s1))
    r2 = await ctx.chat("stage2", [Message(role="user", content=STAGE2.format(
        profile=profile, question=question, answer=answer, i1=pad[0], i2=pad[1], i3=pad[2], i4=pad[3]))],
        role="generator")
    s2 = parse_incorrect(r2.response, range(5, 9))
    return s1, s2


def build(characters_file: str | Path, generator: str, out_dir: str | Path, *, threshold: float = 0.9,
          embedder: str | None = None, progress: bool = True, decoding: Decoding | None = None,
          backend_options: dict | None = None) -> dict[str, Any]:
    """Run the pipeline; writes charm_built.yaml, review_sheet.csv and build records in out_dir."""
    from ...runner import bounded
    from ...loop import default_concurrency
    from ...models import create_backend
    from ...runner import CallFailed, ItemContext, open_session
    from ...scoring.embeddings import get_embedder
    from ...store import RunDir

    path = Path(characters_file)
    raw = read_yaml(path) or {}
    seeds: SeedData = validate_yaml(SeedData, raw, file=path)
    chars = {c.id: c for c in seeds.characters}
    for i, f in enumerate(seeds.facts):
        if f.target not in chars:
            raise InputError(f"unknown character '{f.target}'", file=str(path), field=f"facts[{i}].target")
    out = claim_build(out_dir, path)
    out.mkdir(parents=True, exist_ok=True)
    decoding = decoding or Decoding()          # the default 256 tokens
    backend = create_backend(generator, decoding, **(backend_options or {}))
    emb = get_embedder(embedder)
    stats = BuildStats()
    jobs = [("concept", c, c.bc_question, c.answer, CONCEPT_PROFILE) for c in seeds.concepts] + \
           [("fact", f, f.bc_question, f.answer, chars[f.target].profile) for f in seeds.facts]
    stats.questions = len(jobs)
    rd = RunDir(out / "generation")
    with open_session(rd, "charm-build", backend, decoding) as session:
        results: dict[str, tuple[list[str], list[str]]] = {}

        async def main():
            async def one(job):
                kind, obj, q, a, profile = job
                if len(obj.distractors) >= 3:
                    return
                ctx = ItemContext(session=session, item_id=f"{kind}/{obj.id}", strategy="table21")
                try:
                    results[obj.id] = await _generate_one(ctx, q, a, profile)
                except CallFailed:
                    pass

            try:
                await backend.prepare()
                await bounded(jobs, one, concurrency=default_concurrency(backend), label="charm build",
                              progress=progress)
            finally:
                await backend.close()

        asyncio.run(main())
    complete_concepts, complete_facts, sheet = _choose(jobs, results, chars, emb, threshold, stats, backend.spec)
    built = {"regions": [r.model_dump(exclude_none=True) for r in seeds.regions],
             "characters": [c.model_dump(exclude_none=True) for c in seeds.characters],
             "concepts": complete_concepts, "facts": complete_facts}
    if seeds.cross_ba_templates:
        built["cross_ba_templates"] = seeds.cross_ba_templates
    data_path = out / "charm_built.yaml"
    write_text_atomic(data_path, yaml.safe_dump(built, allow_unicode=True, sort_keys=False))
    sheet_path = out / "review_sheet.csv"
    write_sheet(sheet_path, sheet)
    summary = {"data": str(data_path), "review_sheet": str(sheet_path), "generator": backend.spec,
               "embedder": emb.name, "threshold": threshold, **stats.__dict__,
               "model_calls": session.counts.calls, "cache_hits": session.counts.cache_hits}
    write_text_atomic(out / "build_summary.yaml", yaml.safe_dump(summary, allow_unicode=True, sort_keys=False))
    return summary


OUTPUTS = ("charm_built.yaml", "review_sheet.csv", "review_instructions.md", "build_summary.yaml")


def claim_build(out_dir: str | Path, characters: Path) -> Path:
    """The build folder, if the build may write there: new, empty or an earlier build's
    (store.claim_folder); none of its files is the --characters input, and its review sheet
    holds no reviewer's scores (a build run again would replace them)."""
    from ...store import claim_folder

    out = claim_folder(out_dir, marker="build_summary.yaml", before=frozenset({"generation"}), what="build")
    for name in OUTPUTS:
        check_output_file(out / name, characters, what="the --characters file")
    refuse_filled_sheet(out / "review_sheet.csv", [c for c, _ in CRITERIA] + ["comment"])
    return out


def _choose(jobs, results, chars, emb, threshold: float, stats: BuildStats, generator: str):
    """Three distractors per question (given, or picked from the generated ones): the complete
    concepts and facts, and the review sheet's rows."""
    complete_concepts, complete_facts, sheet = [], [], []
    for kind, obj, q, a, _ in jobs:
        if len(obj.distractors) >= 3:
            stats.kept_given += 1
            chosen = list(obj.distractors[:3])
        else:
            s1, s2 = results.get(obj.id, ([], []))
            if not s1 and not s2:
                stats.unparsed_replies += 1
            stats.generated += len(s1) + len(s2)
            chosen = pick_distractors(a, s1, s2, emb.encode, threshold, stats)
        if len(chosen) < 3:
            stats.incomplete.append(obj.id)
            continue
        stats.complete += 1
        data = obj.model_dump(exclude_none=True)
        data["distractors"] = chosen
        data["validated"] = False
        data.setdefault("note", f"distractors generated by {generator} (Table 21), not yet reviewed")
        region = chars[obj.target].region if kind == "fact" else "shared"   # concepts serve every region
        (complete_concepts if kind == "concept" else complete_facts).append(data)
        sheet.append({"item_id": f"{kind}/{obj.id}", "region": region, "kind": kind, "question": q,
                      "correct_answer": a, "distractor_1": chosen[0], "distractor_2": chosen[1],
                      "distractor_3": chosen[2], **{c: "" for c, _ in CRITERIA}, "comment": ""})
    return complete_concepts, complete_facts, sheet


def write_sheet(path: Path, rows: list[dict]) -> None:
    cols = ["item_id", "region", "kind", "question", "correct_answer", "distractor_1", "distractor_2",
            "distractor_3"] + [c for c, _ in CRITERIA] + ["comment"]
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:    # never through a link
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    guide = ["# Reviewing the CHARM items", "",
             "Two native reviewers per region each fill a copy of review_sheet.csv: score every criterion 1 or 0 "
             "(Table 22), add a comment where useful. Then:", "",
             "    rolebound build charm-review SHEET_A.csv SHEET_B.csv --data charm_built.yaml --out accepted.yaml", "",
             "An item is kept when both reviewers score all four criteria 1; Cohen's kappa per region is printed "
             "(Table 13).", ""] + [f"- `{c}`: {d}" for c, d in CRITERIA]
    write_text_atomic(path.parent / "review_instructions.md", "\n".join(guide) + "\n")


# -- review ---------------------------------------------------------------------------------------
def cohen_kappa(a: list[int], b: list[int]) -> float | None:
    """Cohen's kappa for two raters' labels; None when undefined (no items, or chance agreement 1)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    labels = sorted(set(a) | set(b))
    po = sum(1 for x, y in zip(a, b) if x == y) / n
    pe = sum((a.count(k) / n) * (b.count(k) / n) for k in labels)
    if pe == 1.0:
        return None
    return (po - pe) / (1 - pe)


def read_sheet(path: str | Path) -> dict[str, dict[str, Any]]:
    """item_id -> {region, scores[4], accept} from a filled review sheet."""
    out = {}
    for lineno, row in read_csv_rows(path):
        if not row.get("item_id"):
            raise InputError("missing item_id", file=str(path), line=lineno, field="item_id")
        scores = []
        for c, _ in CRITERIA:
            v = (row.get(c) or "").strip()
            if v not in ("0", "1"):
                raise InputError(f"score must be 0 or 1, got {v!r}", file=str(path), line=lineno, field=c)
            scores.append(int(v))
        out[row["item_id"]] = {"region": row.get("region", ""), "scores": scores, "accept": int(all(scores))}
    return out


def review(sheet_a: str | Path, sheet_b: str | Path, data_file: str | Path, out_file: str | Path) -> dict[str, Any]:
    """Kappa per region on the accept decision (Table 13) and per criterion; keep items both accept."""
    check_output_file(out_file, sheet_a, sheet_b, data_file, what="an input of this review (a sheet or --data)")
    a, b = read_sheet(sheet_a), read_sheet(sheet_b)
    common = sorted(set(a) & set(b))
    if not common:
        raise InputError("the two sheets share no item_id", file=str(sheet_b))
    regions = sorted({a[i]["region"] for i in common})
    kappa = {}
    for reg in regions + ["overall"]:
        ids = [i for i in common if reg == "overall" or a[i]["region"] == reg]
        entry = {"n": len(ids), "accept": cohen_kappa([a[i]["accept"] for i in ids], [b[i]["accept"] for i in ids])}
        for k, (c, _) in enumerate(CRITERIA):
            entry[c] = cohen_kappa([a[i]["scores"][k] for i in ids], [b[i]["scores"][k] for i in ids])
        kappa[reg] = entry
    accepted = {i for i in common if a[i]["accept"] and b[i]["accept"]}
    raw = read_yaml(data_file) or {}
    data = validate_yaml(CharmData, raw, file=data_file)
    keep_c = [c for c in data.concepts if f"concept/{c.id}" in accepted]
    keep_f = [f for f in data.facts if f"fact/{f.id}" in accepted]
    for obj in keep_c + keep_f:
        obj.validated = True
        obj.note = ((obj.note + "; ") if obj.note else "") + f"accepted by both reviewers ({Path(sheet_a).name}, {Path(sheet_b).name})"
    out = {"regions": [r.model_dump(exclude_none=True) for r in data.regions],
           "characters": [c.model_dump(exclude_none=True) for c in data.characters],
           "concepts": [c.model_dump(exclude_none=True) for c in keep_c],
           "facts": [f.model_dump(exclude_none=True) for f in keep_f]}
    write_text_atomic(out_file, yaml.safe_dump(out, allow_unicode=True, sort_keys=False))
    return {"kappa": kappa, "reviewed": len(common), "accepted": len(accepted),
            "dropped": len(common) - len(accepted), "out": str(out_file)}


# -- `rolebound build` -------------------------------------------------------------------------------
def commands(app: typer.Typer) -> None:
    """`rolebound build charm` and `rolebound build charm-review` (the suite's build_commands hook)."""
    @app.command("charm", epilog="Examples:\n\n\b\n"
                 "  rolebound build charm --characters seeds.yaml --generator openai:gpt-4o-mini\n"
                 "  rolebound build charm --characters seeds.yaml -o charm_build -q")
    def build_charm(
        characters: Path = typer.Option(..., "--characters", metavar="FILE", help="YAML: regions, characters, concepts and facts "
                                        "(question + correct answer; distractors optional)"),
        generator: str = typer.Option("bundled", "--generator", metavar="BACKEND:NAME",
                                      help="the model that writes distractors"),
        out: Path = typer.Option(Path("charm_build"), "--out", "-o", metavar="DIR", help="output folder"),
        threshold: float = typer.Option(0.9, "--threshold", metavar="COSINE",
                                        help="cosine at which a distractor is a near-duplicate"),
        embedder: Optional[str] = typer.Option(None, "--embedder", metavar="DIR",
                                               help="local sentence-transformers folder"),
        base_url: Optional[str] = typer.Option(None, "--base-url", metavar="URL",
                                               help="the generator's OpenAI-compatible server URL"),
        max_tokens: int = typer.Option(256, "--max-tokens", metavar="N", help="longest generation, in tokens"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    ):
        """Build CHARM items: distractors for your questions.

        Two-stage distractor generation (Table 21), near-duplicate removal, review sheet (Table 22)."""
        from ...records import Decoding
        
        opts = {"base_url": base_url} if base_url else {}
        res = build(characters, generator, out, threshold=threshold, embedder=embedder, progress=not quiet,
                    decoding=Decoding(max_tokens=max_tokens), backend_options=opts)
        print(f"{res['complete']}/{res['questions']} questions complete "
              f"({res['kept_given']} had distractors, {res['near_duplicates']} near-duplicates dropped, "
              f"{len(res['incomplete'])} incomplete); model calls {res['model_calls']}")
        print(f"data: {res['data']}\nreview sheet: {res['review_sheet']}")

    @app.command("charm-review", epilog="Examples:\n\n\b\n"
                 "  rolebound build charm-review a.csv b.csv --data built.yaml -o accepted.yaml\n"
                 "  rolebound run charm --data accepted.yaml")
    def charm_review(
        sheet_a: Path = typer.Argument(..., metavar="SHEET_A", help="first reviewer's filled review_sheet.csv"),
        sheet_b: Path = typer.Argument(..., metavar="SHEET_B", help="second reviewer's filled review_sheet.csv"),
        data: Path = typer.Option(..., "--data", metavar="FILE", help="the charm_built.yaml the sheets review"),
        out: Path = typer.Option(..., "--out", "-o", metavar="FILE", help="accepted items, loadable with --data"),
    ):
        """Keep the built items both reviewers accept.

        Cohen's kappa per region (Table 13); the items both reviewers accept, loadable with --data."""
        
        res = review(sheet_a, sheet_b, data, out)
        print(f"{res['accepted']}/{res['reviewed']} items accepted by both reviewers -> {res['out']}")
        print("Cohen's kappa on accept/reject (per criterion in brackets):")
        for reg, k in res["kappa"].items():
            crit = ", ".join("-" if k[c] is None else f"{k[c]:.2f}" for c in ("criterion_1", "criterion_2",
                                                                             "criterion_3", "criterion_4"))
            acc = "-" if k["accept"] is None else f"{k['accept']:.2f}"
            print(f"  {reg:12s} n={k['n']:4d}  kappa={acc}  [{crit}]")
