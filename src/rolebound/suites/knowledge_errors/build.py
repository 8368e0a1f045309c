"""Construction of knowledge-errors items from character corpora (paper §4, Tables 8-13).

corpus -> chunks of about eight sentences -> first-person memories with categories (Table 8)
-> a known-knowledge error (Tables 9-10) and an unknown-knowledge error around two random
sub-disciplines (Tables 11-12) for each memory -> each false memory rewritten as a yes/no
question (Table 13). The paper screened the results by hand; we apply automatic checks and count
every drop by reason:

- memories: a `[<Category> Memory] I ...` line with one of the four categories, beginning with
  "I" and under 30 words (the paper's screening rules), not a duplicate;
- injections: exactly one `[explanation]` and one `[manipulate]` part ("You can only generate
  one explanation and manipulate memory"); the false memory begins with "I" and differs from the
  correct one; a KKE edit ("modify only a single position") may touch at most `max_kke_spans`
  separate word spans, more counts as more than one error;
- questions: the first line of the reply, beginning with an auxiliary verb ("Do", "Were", ...)
  and ending with "?";
- pairs: "Erroneous query pairs are discarded if either fails", so a memory yields both items or
  none.
Every model call is a record in `<out>.build/records.jsonl`; rerunning resumes.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import typer

from ...records import Message
from . import prompts
from .data import CATEGORY_LABEL, KECorpus, KEItem, chunk_text, draw_topics

STRATEGY = "build"
MAX_WORDS = 30
AUX = ("do", "does", "did", "are", "is", "was", "were", "have", "has", "had", "can", "could", "would",
       "will", "should", "shall", "may", "might", "must")

_MD = re.compile(r"[*_`]+")
_MEM_LINE = re.compile(r"^\s*(?:[-•]\s*|\d+[.)]\s*)?\[\s*([^\]]+?)\s*(?:\]|$)\s*:?\s*(.*?)\s*$")
_SECTION = re.compile(r"\[\s*(explanation|manipulate)\s*\]\s*:?", re.IGNORECASE)


def _user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "x"


# -- parsers (pure) -----------------------------------------------------------------------------
def parse_memories(text: str | None) -> tuple[list[tuple[str, str]], Counter]:
    """(category, memory) pairs from a Table 8 reply, and the lines dropped by reason."""
    kept: list[tuple[str, str]] = []
    drops: Counter = Counter()
    labels = {v.lower(): k for k, v in CATEGORY_LABEL.items()}
    labels.update({k: k for k in CATEGORY_LABEL})
    labels.update({"relation memory": "relational", "attitude memory": "attitudinal"})
    if not text or not text.strip():
        drops["empty_reply"] += 1
        return kept, drops
    seen = set()
    for line in _MD.sub("", text).splitlines():
        if not line.strip():
            continue
        m = _MEM_LINE.match(line)
        if not m:
            drops["not_a_memory_line"] += 1
            continue
        cat = labels.get(m.group(1).strip().lower())
        mem = m.group(2).strip().strip('"').strip()
        if not mem:
            drops["empty_memory"] += 1
        elif cat is None:
            drops["bad_category"] += 1
        elif not re.match(r"^I\b", mem):
            drops["not_first_person"] += 1
        elif len(mem.split()) >= MAX_WORDS:
            drops["too_long"] += 1
        elif mem.lower() in seen:
            drops["duplicate"] += 1
        else:
            seen.add(mem.lower())
            kept.append((cat, mem))
    return kept, drops


def parse_manipulation(text: str | None) -> tuple[str, str] | str:
    """(explanation, false memory) from a Table 9/11 reply, or the reason it is unusable."""
    if not text:
        return "format"
    clean = _MD.sub("", text)
    marks = [(m.group(1).lower(), m.start(), m.end()) for m in _SECTION.finditer(clean)]
    kinds = [k for k, _, _ in marks]
    if kinds.count("explanation") != 1 or kinds.count("manipulate") != 1:
        return "multiple_errors" if kinds.count("manipulate") > 1 else "format"
    parts = {}
    for i, (k, _, end) in enumerate(marks):
        stop = marks[i + 1][1] if i + 1 < len(marks) else len(clean)
        parts[k] = clean[end:stop].strip()
    expl, manip = parts["explanation"], parts["manipulate"].strip().strip('"').strip()
    manip = manip.split("\n\n")[0].strip()
    if not expl or not manip:
        return "format"
    if not re.match(r"^I\b", manip):
        return "not_first_person"
    return expl, manip


def changed_spans(a: str, b: str) -> int:
    """Word spans that differ between two sentences (difflib opcodes that are not 'equal')."""
    wa, wb = re.findall(r"\w+|[^\w\s]", a.lower()), re.findall(r"\w+|[^\w\s]", b.lower())
    return sum(1 for op in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes() if op[0] != "equal")


def parse_question(text: str | None) -> str | None:
    """The yes/no question of a Table 13 reply, or None when it does not have that form."""
    if not text:
        return None
    for line in _MD.sub("", text).splitlines():
        s = line.strip()
        if not s:
            continue
        s = re.sub(r"^(?:rewritten question|question|output)\s*:\s*", "", s, flags=re.IGNORECASE)
        s = s.strip().strip('"“”<>').strip()
        first = re.split(r"\W+", s, maxsplit=1)[0].lower() if s else ""
        return s if first in AUX and s.endswith("?") else None
    return None


# -- steps (each one model call, a record of its own) ----------------------------------------------
async def step_memories(ctx, character: str, chunk: str, max_tokens: int | None = None):
    rec = await ctx.chat("memories", _user(prompts.MEMORIES.format(role_name=character, memory_chunk=chunk)),
                         role="generator", max_tokens=max_tokens)
    return parse_memories(rec.response)


async def step_inject(ctx, kind: str, j: int, character: str, category: str, memory: str,
                      topics: list[str] | None = None, max_tokens: int | None = None):
    label = CATEGORY_LABEL[category]
    if kind == "KKE":
        prompt = prompts.KKE_INJECT.format(role_name=character, memory_category=label, correct_memory=memory,
                                     memory_explanation=prompts.KKE_EXPLAIN[category].format(role_name=character))
    else:
        prompt = prompts.UKE_INJECT.format(role_name=character, memory_category=label, correct_memory=memory,
                                     memory_explanation=prompts.UKE_EXPLAIN[category].format(role_name=character),
                                     topic1=topics[0], topic2=topics[1])
    rec = await ctx.chat(f"{kind.lower()}.{j}", _user(prompt), role="generator", max_tokens=max_tokens,
                         meta={"memory": j, "category": category, "error_type": kind})
    return parse_manipulation(rec.response)


async def step_question(ctx, stage: str, character: str, memory: str, max_tokens: int | None = None):
    rec = await ctx.chat(stage, _user(prompts.TO_QUESTION.format(role_name=character, manipulate_memory=memory)),
                         role="generator", max_tokens=max_tokens)
    return parse_question(rec.response)


# -- the pipeline ---------------------------------------------------------------------------------
@dataclass
class BuildOptions:
    chunk_sentences: int = 8
    max_chunks: int | None = None            # per character
    max_memories: int | None = None          # per chunk
    max_kke_spans: int = 2
    correct_queries: bool = True
    seed: int = 0
    max_tokens: int | None = None
    source: str = ""


@dataclass
class BuildResult:
    items: list[KEItem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    drops: Counter = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "drops": dict(sorted(self.drops.items()))}


async def build_memory(ctx, res: BuildResult, opts: BuildOptions, topics_all: list[str], character: str,
                       chunk: str, mem_id: str, j: int, category: str, memory: str) -> list[KEItem]:
    """Both queries of one memory, or none (counted)."""
    topics = draw_topics(topics_all, mem_id, opts.seed)
    kke, uke = await asyncio.gather(
        step_inject(ctx, "KKE", j, character, category, memory, max_tokens=opts.max_tokens),
        step_inject(ctx, "UKE", j, character, category, memory, topics, max_tokens=opts.max_tokens))
    bad = []
    for kind, out in (("KKE", kke), ("UKE", uke)):
        if isinstance(out, str):
            bad.append(f"{kind.lower()}_{out}")
        elif out[1].strip().rstrip(".").lower() == memory.strip().rstrip(".").lower():
            bad.append(f"{kind.lower()}_unchanged")
        elif kind == "KKE" and changed_spans(memory, out[1]) > opts.max_kke_spans:
            bad.append("kke_multiple_errors")
    if bad:
        res.drops.update(bad)
        res.counts["pairs_dropped"] += 1
        return []
    stages = [("question.kke", kke[1]), ("question.uke", uke[1])]
    if opts.correct_queries:
        stages.append(("question.correct", memory))
    qs = await asyncio.gather(*[step_question(ctx, f"{s}.{j}", character, m, opts.max_tokens) for s, m in stages])
    bad = [f"{s.split('.')[1]}_question_format" for (s, _), q in zip(stages[:2], qs[:2]) if q is None]
    if bad:
        res.drops.update(bad)
        res.counts["pairs_dropped"] += 1
        return []
    cq = qs[2] if opts.correct_queries else None
    common = dict(character=character, memory_id=mem_id, memory_category=category, correct_memory=memory,
                  chunk=chunk, correct_query=cq, source=opts.source, validated=False)
    res.counts["pairs_kept"] += 1
    return [KEItem(id=f"{mem_id}-kke", error_type="KKE", false_memory=kke[1], query=qs[0], explanation=kke[0],
                   **common),
            KEItem(id=f"{mem_id}-uke", error_type="UKE", false_memory=uke[1], query=qs[1], explanation=uke[0],
                   topics=topics, note=f"UKE reference topics: {topics[0]}; {topics[1]}", **common)]


async def build_chunk(session, res: BuildResult, opts: BuildOptions, topics_all: list[str], character: str,
                      ci: int, chunk: str) -> list[KEItem]:
    from ...runner import CallFailed, ItemContext

    cid = f"{slug(character)}-c{ci:03d}"
    ctx = ItemContext(session=session, item_id=cid, strategy=STRATEGY, meta={"character": character, "chunk": ci})
    try:
        mems, drops = await step_memories(ctx, character, chunk, opts.max_tokens)
        res.drops.update({f"memory_{k}": v for k, v in drops.items()})
        res.counts["memories_parsed"] += len(mems)
        if opts.max_memories is not None:
            res.counts["memories_over_limit"] += max(0, len(mems) - opts.max_memories)
            mems = mems[: opts.max_memories]
        outs = await asyncio.gather(*[
            build_memory(ctx, res, opts, topics_all, character, chunk, f"{cid}-m{j:02d}", j, cat, mem)
            for j, (cat, mem) in enumerate(mems)])
    except CallFailed as exc:
        res.counts["failed_calls"] += 1
        res.drops["call_failed"] += 1
        session.errors.append(f"{exc.record.call_id}: {exc.record.error}")
        return []
    return [it for out in outs for it in out]


async def build(session, corpus: list[KECorpus], topics_all: list[str], opts: BuildOptions,
                concurrency: int = 64) -> BuildResult:
    from ...runner import bounded

    res = BuildResult()
    jobs = []
    for c in corpus:
        chunks = chunk_text(c.text, opts.chunk_sentences)
        if opts.max_chunks is not None:
            chunks = chunks[: opts.max_chunks]
        res.counts["chunks"] += len(chunks)
        jobs += [(c.character, i, ch) for i, ch in enumerate(chunks)]

    async def one(job):
        return await build_chunk(session, res, opts, topics_all, *job)

    outs = await bounded(jobs, one, concurrency=concurrency, label="knowledge-errors build")
    res.items = [it for out in outs for it in out]
    res.counts["items"] = len(res.items)
    return res


# -- files ----------------------------------------------------------------------------------------
def load_build_corpus(src: str) -> list[KECorpus]:
    """A corpus file (YAML/JSONL of character + text) or Character-LLM profiles (folder or .txt)."""
    from pathlib import Path

    from .importers import profile_corpora
    from .data import load_corpus

    p = Path(src)
    if p.is_dir() or p.suffix.lower() == ".txt":
        return profile_corpora(p)
    return load_corpus(p)


def run_build(corpus_src: str, out: str, *, model: str = "bundled", characters: list[str] | None = None,
              opts: BuildOptions | None = None, topics_file: str | None = None, decoding=None,
              backend_options: dict | None = None, use_cache: bool = True, overwrite: bool = False,
              concurrency: int | None = None) -> tuple[BuildResult, dict[str, str]]:
    """Build items from a corpus; writes OUT (items JSONL), OUT's sibling corpus and OUT.build/."""
    import json
    import shutil
    from pathlib import Path

    from ...errors import InputError, RoleboundError
    from ...io import check_output_file, read_regular, stable_hash, write_text_atomic
    from ...models import create_backend
    from ...models.base import CHAT
    from ...records import Decoding
    from ...runner import now, open_session
    from ...store import RunDir, claim_folder
    from .data import corpus_to_yaml, items_to_jsonl, load_topics

    opts = opts or BuildOptions()
    corpus = load_build_corpus(corpus_src)
    if characters:
        names = {c.character for c in corpus}
        missing = [c for c in characters if c not in names]
        if missing:
            raise InputError(f"no corpus for '{missing[0]}'; have: {', '.join(sorted(names))}", field="--characters")
        corpus = [c for c in corpus if c.character in characters]
    topics = load_topics(topics_file)
    decoding = decoding or Decoding()
    backend = create_backend(model, decoding, **(backend_options or {}))
    backend.require(CHAT, "the construction prompts are answered by generation")
    out_path = Path(out)
    if out_path.suffix != ".jsonl":
        raise InputError("the output must be a .jsonl file", field="--out")
    build_dir = out_path.with_suffix(".build")
    corpus_out = out_path.with_name(out_path.stem + ".corpus.yaml")
    for target in (out_path, corpus_out):       # never one of the build's inputs
        check_output_file(target, corpus_src, *([topics_file] if topics_file else []),
                          what="an input of this build (the corpus or --topics)")
    # a folder of this build's records only: --overwrite never clears anyone else's folder
    claim_folder(build_dir, marker="build.json", before=frozenset({".lock", "records.jsonl", "errors.log"}),
                 what="build")
    opts.source = opts.source or (f"built by `rolebound build knowledge-errors` from {corpus_src} with {backend.spec} "
                                  "(Tables 8-13, automatic screening only)")
    key = {"model": backend.spec, "decoding": decoding.model_dump(), "corpus": stable_hash([c.model_dump() for c in corpus]),
           "topics": stable_hash(topics), "options": {k: v for k, v in opts.__dict__.items() if k != "source"}}
    info_path = build_dir / "build.json"
    if info_path.exists() and not overwrite:
        old = json.loads(read_regular(info_path).decode("utf-8")).get("key")
        if old != key:
            raise RoleboundError(f"{build_dir} holds a different build (model, corpus or options differ); "
                                 "use another --out, or --overwrite")
    if overwrite and build_dir.exists():
        shutil.rmtree(build_dir)
    rd = RunDir(build_dir)
    started = now()
    with open_session(rd, "knowledge-errors", backend, decoding, use_cache=use_cache) as session:
        # a job is a whole chunk (a chain of calls), so fewer in flight than run items
        conc = concurrency or (64 if getattr(backend, "batching", False) else 8)

        async def go():
            await backend.prepare()
            try:
                return await build(session, corpus, topics, opts, concurrency=conc)
            finally:
                await backend.close()

        res = asyncio.run(go())
    res.counts["model_calls"] = session.counts.calls
    res.counts["cache_hits"] = session.counts.cache_hits
    res.counts["resumed"] = session.counts.resumed
    items_to_jsonl(res.items, out_path)
    corpus_to_yaml(corpus, corpus_out)
    info = {"key": key, "corpus_source": corpus_src, "started": started, "finished": now(),
            "errors": session.errors, **res.summary()}
    write_text_atomic(info_path, json.dumps(info, indent=2, ensure_ascii=False))
    return res, {"items file": str(out_path), "corpus file": str(corpus_out), "records": str(rd.records_path),
                 "build info": str(info_path)}


# -- `rolebound build` -------------------------------------------------------------------------------
def build_knowledge_errors(
    corpus: str = typer.Argument(..., metavar="CORPUS", help="corpus YAML/JSONL (character, text, source), or a folder of "
                                           "Character-LLM wiki_*.txt profiles"),
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE", help="items JSONL to write (the corpus is copied beside it as "
                                                      "<stem>.corpus.yaml; records go to <stem>.build/)"),
    model: str = typer.Option("bundled", "--model", "-m", metavar="BACKEND:NAME", help="the generator model"),
    characters: Optional[str] = typer.Option(None, "--characters", metavar="NAMES",
                                             help="only these, comma-separated"),
    max_chunks: Optional[int] = typer.Option(None, "--max-chunks", min=1, metavar="N", help="chunks per character"),
    max_memories: Optional[int] = typer.Option(None, "--max-memories", min=1, metavar="N", help="memories per chunk"),
    chunk_sentences: int = typer.Option(8, "--chunk-sentences", min=1, metavar="N",
                                        help="sentences per chunk (paper: ~8)"),
    max_kke_spans: int = typer.Option(2, "--max-kke-spans", min=1, metavar="N",
                                      help="changed word spans a KKE edit may have before it counts as >1 error"),
    correct_queries: bool = typer.Option(True, "--correct-queries/--no-correct-queries",
                                         help="also turn each correct memory into a question (hidden-state analysis)"),
    topics: Optional[str] = typer.Option(None, "--topics", metavar="FILE",
                                         help="sub-discipline list (default: the shipped one)"),
    seed: int = typer.Option(0, "--seed", metavar="N", help="topic draws and sampling seed"),
    temperature: Optional[float] = typer.Option(None, "--temperature", metavar="T",
                                                help="the generator's temperature (default: the backend's)"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, metavar="N",
                                             help="longest generation, in tokens"),
    base_url: Optional[str] = typer.Option(None, "--base-url", metavar="URL",
                                           help="the generator's OpenAI-compatible server URL"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="VAR",
                                              help="env var holding the generator's API key"),
    dtype: Optional[str] = typer.Option(None, "--dtype", metavar="TYPE", help="local models: auto, bf16, fp32"),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1, metavar="N",
                                              help="requests in flight"),
    no_cache: bool = typer.Option(False, "--no-cache", help="bypass the shared response cache"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start the build folder again"),
):
    """Build knowledge-errors items from character corpora.

    KKE and UKE yes/no queries, from each corpus chunk's memories (Tables 8-13)."""
    from ...records import Decoding
    
    dec = Decoding().merged(temperature=temperature, max_tokens=max_tokens, seed=seed)
    bopts = {k: v for k, v in dict(base_url=base_url, api_key_env=api_key_env, dtype=dtype,
                                   concurrency=concurrency).items() if v is not None}
    opts = BuildOptions(chunk_sentences=chunk_sentences, max_chunks=max_chunks, max_memories=max_memories,
                        max_kke_spans=max_kke_spans, correct_queries=correct_queries, seed=seed)
    chars = [c.strip() for c in characters.split(",") if c.strip()] if characters else None
    res, paths = run_build(corpus, str(out), model=model, characters=chars, opts=opts, topics_file=topics,
                           decoding=dec, backend_options=bopts, use_cache=not no_cache, overwrite=overwrite,
                           concurrency=concurrency)
    from ... import term
    from rich.table import Table

    t = Table(title="knowledge-errors build", show_header=False)
    for k in ("chunks", "memories_parsed", "memories_over_limit", "pairs_kept", "pairs_dropped", "items",
              "model_calls", "cache_hits", "resumed", "failed_calls"):
        if k in res.counts:
            t.add_row(k, str(res.counts[k]))
    for k, v in sorted(res.drops.items()):
        t.add_row(f"dropped: {k}", str(v))
    for k, v in paths.items():
        t.add_row(k, v)
    term.console().print(t)
    if res.counts.get("failed_calls"):
        raise typer.Exit(3)


def commands(app) -> None:
    """`rolebound build knowledge-errors` (the suite's build_commands hook)."""
    app.command("knowledge-errors", epilog="Examples:\n\n\b\n"
                "  rolebound build knowledge-errors my.corpus.yaml -o mine.jsonl -m openai:o3\n"
                "  rolebound build knowledge-errors profiles/ --max-chunks 3 -o small.jsonl\n"
                "  rolebound run knowledge-errors --data mine.jsonl")(build_knowledge_errors)
