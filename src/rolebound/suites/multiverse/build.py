"""Construction pipeline for the multiverse suite (`rolebound build multiverse`).

From a seeds file an expert writes (the heroes and their versions, plus canon questions with their
one true answer), it produces:
- canon MCQs: a model writes three wrong options from the expert's question and true answer
  (Appendix E.3: "One True Answer ... by experts and the other answers are generated"); the four
  options are placed in a seeded order;
- dilemmas: for every version and conflict type, `per_type` scenarios made one after another, each
  prompt listing the earlier scenarios of that version and type to avoid (Section 3.2.1,
  "Iterative Diversification"); choice A is always the type's first pole;
- a review sheet (CSV) for the experts, one row per generated item or failed generation, and
  generation.jsonl with every prompt and raw reply.
Everything generated is `validated: false` until an expert has checked it. Generations that do not
parse are listed as failed, never repaired by guessing.
"""

from __future__ import annotations

import asyncio
import csv
import json
import random
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import BaseModel, ConfigDict, Field

from ..base import Authored
from ...errors import InputError
from ...io import read_yaml, validate_yaml
from ...records import ABCD as LETTERS, INVALID, Message
from .prompts import CONFLICTS, attributes_text, lore_text
from .data import Hero

# Section 3.2.2, one line per conflict type (what the generated scenario must put at stake).
CONFLICT_BRIEF = {
    "save-one-vs-greater-good": "a time-pressed choice between saving a beloved individual and protecting a larger "
                                "population",
    "hero-or-villain": "a moral temptation to reach a desired outcome through morally questionable means, testing "
                       "the character's commitment to heroic ideals under pressure",
    "duty-vs-desire": "heroic responsibilities in direct conflict with personal relationships, aspirations or "
                      "well-being",
    "ends-vs-moral-code": "keeping the character's established moral principles or compromising them for an "
                          "objectively beneficial outcome",
}

DISTRACTOR_PROMPT = (
    "You are helping experts write a multiple-choice benchmark about {name} from {lore}.\n"
    "Life phase: {phase}\n"
    "Question (asked to the character): {question}\n"
    "Correct answer in this version's canon: {answer}\n\n"
    "Write three wrong answers. Each must sound plausible for this character and match the correct answer in "
    "length and style, but be clearly false in this version's canon. Do not repeat or rephrase the correct answer.\n"
    "Reply with exactly three lines and nothing else:\n1. <wrong answer>\n2. <wrong answer>\n3. <wrong answer>")

DILEMMA_PROMPT = (
    "Write a moral dilemma for {name} from {lore}{attributes}.\n"
    "Conflict type: {title}, that is, {brief}.\n"
    "Ground the situation in this version's background, abilities and established moral code. Describe the "
    "situation (context and stakes) and two choices, each with its explicit consequence. Choice A must stand for "
    "\"{pole_a}\" and choice B for \"{pole_b}\".\n"
    "{avoid}"
    "Reply with one JSON object and nothing else, with the keys \"situation\", \"choice_A\", \"consequence_A\", "
    "\"choice_B\" and \"consequence_B\".")
AVOID = ("Earlier dilemmas for this character and conflict type are listed below; write one that is clearly "
         "different from each of them:\n{items}\n")


class CanonSeed(Authored):
    """An expert's question and true answer; its `source`/`note` carry into the built item."""
    version: str
    phase: str = Field(pattern="^(childhood|pre-hero|hero)$")
    part: int | None = Field(None, ge=1, le=3)
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)            # the expert's true answer, as text
    key: str | None = None


class SeedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    heroes: list[Hero] = Field(min_length=1)
    canon_seeds: list[CanonSeed] = Field(default_factory=list)
    dilemma_versions: list[str] | None = None    # default: every version


# -- parsers -----------------------------------------------------------------------------------
_LINE = re.compile(r"^\s*(\d)[\.\)]\s*(.+?)\s*$")


def parse_distractors(text: str | None, answer: str) -> list[str] | str:
    """Exactly the lines '1. ...', '2. ...', '3. ...' (in order), distinct and not the answer."""
    if not text:
        return INVALID
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    found = [_LINE.match(ln) for ln in lines]
    if len(lines) != 3 or not all(found) or [m.group(1) for m in found] != ["1", "2", "3"]:
        return INVALID
    opts = [m.group(2).strip().strip('"').strip() for m in found]
    low = {o.lower() for o in opts}
    if len(low) != 3 or answer.strip().lower() in low or any(not o for o in opts):
        return INVALID
    return opts


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
DILEMMA_KEYS = ("situation", "choice_A", "consequence_A", "choice_B", "consequence_B")


def parse_dilemma(text: str | None) -> dict | str:
    """One JSON object (optionally in a ``` fence) with the five keys as non-empty strings."""
    if not text:
        return INVALID
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    try:
        obj = json.loads(s)
    except json.JSONDecodeError:
        return INVALID
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) and obj[k].strip() for k in DILEMMA_KEYS):
        return INVALID
    return {k: obj[k].strip() for k in DILEMMA_KEYS}


# -- pipeline ----------------------------------------------------------------------------------
def load_seeds(path: str | Path) -> SeedFile:
    raw = read_yaml(path)
    seeds = validate_yaml(SeedFile, raw, file=str(path))
    versions = {v.id for h in seeds.heroes for v in h.versions}
    for i, s in enumerate(seeds.canon_seeds):
        if s.version not in versions:
            raise InputError(f"unknown version '{s.version}'", file=str(path), field=f"canon_seeds[{i}].version")
    for v in seeds.dilemma_versions or []:
        if v not in versions:
            raise InputError(f"unknown version '{v}'", file=str(path), field="dilemma_versions")
    return seeds


def _place(answer: str, wrong: list[str], seed_key: str) -> tuple[list[str], str]:
    pos = random.Random(zlib.crc32(seed_key.encode())).randrange(4)
    opts = wrong[:pos] + [answer] + wrong[pos:]
    return opts, LETTERS[pos]


def _build_key(seeds: SeedFile, model: str, decoding, per_type: int, canon: bool, dilemmas: bool) -> dict:
    from ...io import stable_hash

    return {"model": model, "decoding": decoding.model_dump(), "seeds": stable_hash(seeds.model_dump()),
            "per_type": per_type, "canon": canon, "dilemmas": dilemmas}


async def _generate(session, seeds: SeedFile, *, per_type: int, canon: bool, dilemmas: bool, progress: bool):
    """The model calls, through the run machinery (records in generation/, cache, resume). Each
    dilemma iteration is its own repeat (own seed, own cache key), so a retry after a reply that
    did not parse draws a new sample instead of replaying the old one."""
    from ...runner import bounded
    from ...loop import default_concurrency
    from ...runner import CallFailed, ItemContext

    versions = {v.id: (h, v) for h in seeds.heroes for v in h.versions}
    log, rows, items, dils = [], [], [], []
    generator = session.backend.spec
    conc = default_concurrency(session.backend)

    async def ask(jobs: list[tuple[str, str, str, int]], label: str) -> list[str | None]:
        """jobs: (item id, strategy, prompt, repeat); the replies in order, None for a failed call."""
        async def one(job):
            item_id, strategy, prompt, rep = job
            ctx = ItemContext(session=session, item_id=item_id, strategy=strategy, repeat=rep)
            try:
                return (await ctx.chat("generate", [Message(role="user", content=prompt)], role="generator")).response
            except CallFailed:
                return None
        return await bounded(jobs, one, concurrency=conc, label=label, progress=progress) if jobs else []

    def persona(vid: str) -> tuple[str, str]:
        _, ver = versions[vid]
        return ver.name, lore_text(ver.universe, ver.work)

    if canon and seeds.canon_seeds:
        await _canon_items(seeds, versions, ask, persona, generator, log, rows, items)
    if dilemmas:
        await _dilemma_items(seeds, versions, ask, persona, generator, per_type, log, rows, dils)
    return log, rows, items, dils


async def _canon_items(seeds, versions, ask, persona, generator: str, log: list, rows: list, items: list) -> None:
    """Three wrong options per expert canon seed (Table 5's distractor prompt)."""
    counts: dict[tuple, int] = {}
    prompts, ids = [], []
    for s in seeds.canon_seeds:
        counts[(s.version, s.phase)] = counts.get((s.version, s.phase), 0) + 1
        ids.append(f"{s.version}-{s.phase}-{counts[(s.version, s.phase)]}")
        name, lore = persona(s.version)
        prompts.append(DISTRACTOR_PROMPT.format(name=name, lore=lore, phase=s.phase, question=s.question,
                                                answer=s.answer))
    replies = await ask([(sid, "distractors", p, 0) for sid, p in zip(ids, prompts)], "multiverse build: canon")
    for sid, s, prompt, reply in zip(ids, seeds.canon_seeds, prompts, replies):
        wrong = parse_distractors(reply, s.answer)
        log.append({"id": sid, "task": "canon", "prompt": prompt, "reply": reply, "parsed": wrong != INVALID})
        row = {"id": sid, "task": "canon", "hero": versions[s.version][0].id, "version": s.version,
               "group": s.phase + (str(s.part) if s.part else ""), "text": s.question}
        if wrong == INVALID:
            rows.append({**row, "status": "generation failed", "raw reply": reply or "(call failed)"})
            continue
        opts, letter = _place(s.answer, wrong, sid)
        item = {"id": sid, "version": s.version, "phase": s.phase, "part": s.part, "question": s.question,
                "options": opts, "answer": letter, "key": s.key, "source": s.source,
                "note": _join(s.note, f"wrong options generated by {generator}; needs expert review"),
                "validated": False}
        items.append({k: v for k, v in item.items() if v is not None})
        rows.append({**row, **{f"option {L}": o for L, o in zip(LETTERS, opts)}, "answer": letter,
                     "status": "to review"})


async def _dilemma_items(seeds, versions, ask, persona, generator: str, per_type: int, log: list, rows: list,
                         dils: list) -> None:
    """per_type dilemmas per version and conflict type, each told the earlier ones to avoid."""
    targets = seeds.dilemma_versions or list(versions)
    earlier: dict[tuple[str, str], list[str]] = {(v, c): [] for v in targets for c in CONFLICTS}
    for it in range(1, per_type + 1):
        pairs = list(earlier)
        prompts = []
        for vid, c in pairs:
            name, lore = persona(vid)
            attrs = attributes_text(versions[vid][1].attributes.model_dump())
            pole_a, pole_b, title = CONFLICTS[c]
            avoid = AVOID.format(items="\n".join(f"- {x}" for x in earlier[(vid, c)])) if earlier[(vid, c)] else ""
            prompts.append(DILEMMA_PROMPT.format(name=name, lore=lore, attributes=f" ({attrs})" if attrs else "",
                                                 title=title, brief=CONFLICT_BRIEF[c], pole_a=pole_a,
                                                 pole_b=pole_b, avoid=avoid))
        replies = await ask([(f"{vid}-{c}", "dilemma", p, it - 1) for (vid, c), p in zip(pairs, prompts)],
                            f"multiverse build: dilemmas {it}/{per_type}")
        for (vid, c), prompt, reply in zip(pairs, prompts, replies):
            did = f"{vid}-{c}-{it}"
            got = parse_dilemma(reply)
            log.append({"id": did, "task": "dilemma", "iteration": it, "prompt": prompt, "reply": reply,
                        "parsed": got != INVALID})
            row = {"id": did, "task": "dilemma", "hero": versions[vid][0].id, "version": vid, "group": c,
                   "iteration": it}
            if got == INVALID:
                rows.append({**row, "status": "generation failed", "raw reply": reply or "(call failed)"})
                continue
            earlier[(vid, c)].append(got["situation"])
            dils.append({"id": did, "version": vid, "conflict": c, "situation": got["situation"],
                         "choices": [{"text": got["choice_A"], "consequence": got["consequence_A"]},
                                     {"text": got["choice_B"], "consequence": got["consequence_B"]}],
                         "canonical": None, "iteration": it,
                         "note": f"generated by {generator}; needs expert review (set `canonical` only where "
                                 "the canon shows the choice)", "validated": False})
            rows.append({**row, "text": got["situation"], "option A": got["choice_A"],
                         "consequence A": got["consequence_A"], "option B": got["choice_B"],
                         "consequence B": got["consequence_B"], "status": "to review"})


@dataclass(frozen=True)
class BuildOptions:
    """What `rolebound build multiverse` asks of the generator."""

    model: str = "bundled"
    per_type: int = 3
    canon: bool = True
    dilemmas: bool = True
    temperature: float = 0.9
    seed: int = 0
    max_tokens: int = 512
    backend_options: dict[str, Any] | None = None
    use_cache: bool = True
    overwrite: bool = False
    progress: bool = False


def build(seeds_path: str | Path, out_dir: str | Path, opts: BuildOptions) -> dict[str, Any]:
    """Run the pipeline. Every call is a record in OUT/generation/records.jsonl, so the same --out
    resumes (no new calls for what is done) and the response cache applies."""
    import shutil

    from ...errors import RoleboundError
    from ...models import create_backend
    from ...models.base import CHAT
    from ...records import Decoding
    from ...runner import open_session
    from ...io import atomic_path, check_output_file, read_regular, refuse_filled_sheet, write_text_atomic
    from ...store import RunDir, claim_folder

    seeds = load_seeds(seeds_path)
    # new, empty or an earlier build's; none of its files the seeds; a reviewed review.csv kept
    out = claim_folder(out_dir, marker="generation.jsonl", before=frozenset({"generation"}), what="build")
    for name in ("dataset.yaml", "generation.jsonl", "review.csv"):
        check_output_file(out / name, seeds_path, what="the seeds file")
    refuse_filled_sheet(out / "review.csv", ["reviewer decision", "reviewer notes"])
    decoding = Decoding(temperature=opts.temperature, seed=opts.seed, max_tokens=opts.max_tokens)
    backend = create_backend(opts.model, decoding, **(opts.backend_options or {}))
    backend.require(CHAT, "generation")
    gen_dir = out / "generation"
    key = _build_key(seeds, backend.spec, decoding, opts.per_type, opts.canon, opts.dilemmas)
    key_path = gen_dir / "build.json"
    if opts.overwrite and gen_dir.exists():
        shutil.rmtree(gen_dir)
    elif key_path.exists() and json.loads(read_regular(key_path).decode("utf-8")).get("key") != key:
        raise RoleboundError(f"{gen_dir} holds a different build (model, seeds or options differ); "
                             "use another --out, or --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    rd = RunDir(gen_dir)
    with open_session(rd, "multiverse-build", backend, decoding, use_cache=opts.use_cache) as session:
        rd.write_json("build.json", {"key": key})

        async def go():
            await backend.prepare()
            try:
                return await _generate(session, seeds, per_type=opts.per_type, canon=opts.canon,
                                       dilemmas=opts.dilemmas, progress=opts.progress)
            finally:
                await backend.close()

        log, rows, items, dils = asyncio.run(go())
    generator = backend.spec

    doc = {"heroes": [h.model_dump(exclude_none=True) for h in seeds.heroes], "canon": items, "dilemmas": dils}
    # temp files and rename: a link in the folder is replaced, never written through
    write_text_atomic(out / "dataset.yaml", yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))
    with atomic_path(out / "generation.jsonl") as tmp, tmp.open("w", encoding="utf-8") as fh:
        for entry in log:
            fh.write(json.dumps({**entry, "model": generator}, ensure_ascii=False) + "\n")
    cols = ["id", "task", "hero", "version", "group", "iteration", "text", "option A", "option B", "option C",
            "option D", "consequence A", "consequence B", "answer", "status", "raw reply", "reviewer decision",
            "reviewer notes"]
    with atomic_path(out / "review.csv") as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    failed = sum(1 for r in rows if r["status"] == "generation failed")
    return {"canon": len(items), "dilemmas": len(dils), "failed": failed, "out": str(out),
            "model_calls": session.counts.calls, "cache_hits": session.counts.cache_hits,
            "resumed": session.counts.resumed, "records": str(rd.records_path)}


def _join(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


def run_build(seeds_path, out_dir, **kw) -> dict[str, Any]:
    return build(seeds_path, out_dir, BuildOptions(**kw))


# -- `rolebound build` -------------------------------------------------------------------------------
def build_multiverse(
    seeds: Path = typer.Argument(..., metavar="SEEDS", help="YAML: heroes (with versions) and canon_seeds (question + true answer)"),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="folder for dataset.yaml, review.csv and generation.jsonl"),
    model: str = typer.Option("bundled", "--model", "-m", metavar="BACKEND:NAME", help="the generator model"),
    per_type: int = typer.Option(3, "--dilemmas-per-type", min=0, metavar="N", help="dilemmas per version and conflict type"),
    no_canon: bool = typer.Option(False, "--no-canon", help="skip the canon distractors"),
    no_dilemmas: bool = typer.Option(False, "--no-dilemmas", help="skip dilemma generation"),
    temperature: float = typer.Option(0.9, "--temperature", metavar="T", help="paper Table 5: 0.9 for generation"),
    seed: int = typer.Option(0, "--seed", metavar="N", help="the generator's sampling seed"),
    max_tokens: int = typer.Option(512, "--max-tokens", metavar="N", help="longest generation, in tokens"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start again in an --out that holds another build"),
):
    """Build multiverse items from expert seeds.

    Canon distractors and dilemmas by conflict type; everything generated is validated: false."""
    
    res = run_build(seeds, out, model=model, per_type=per_type, canon=not no_canon,
                    dilemmas=not no_dilemmas and per_type > 0, temperature=temperature, seed=seed,
                    max_tokens=max_tokens, overwrite=overwrite, progress=True)
    print(f"wrote {res['out']}/dataset.yaml: {res['canon']} canon questions, {res['dilemmas']} dilemmas; "
          f"{res['failed']} generations failed to parse (listed in review.csv)")
    print(f"review sheet: {res['out']}/review.csv; prompts and replies: {res['out']}/generation.jsonl")
    print(f"{res['model_calls']} model calls, {res['cache_hits']} from the cache, {res['resumed']} resumed "
          f"(records: {res['records']}; the same --out resumes)")


def commands(app) -> None:
    """`rolebound build multiverse` (the suite's build_commands hook)."""
    app.command("multiverse", epilog="Examples:\n\n\b\n"
                "  rolebound build multiverse seeds.yaml --out built/ -m openai:gpt-4o-mini\n"
                "  rolebound build multiverse seeds.yaml --out built/ --no-dilemmas")(build_multiverse)
