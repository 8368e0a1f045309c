"""Data of the knowledge-errors suite: items, per-character corpora, the few-shot pool, topics.

An item is one yes/no query that carries one injected error about one true memory of a character
(Zhang et al., "Revealing the Challenge of Detecting Character Knowledge Errors in LLM
Role-Playing"). The KKE and UKE item of a memory share `memory_id`.

Files:
- items: JSONL, one KEItem a line (the starter set, `rolebound build` output, or an import);
  a RoleKE-Bench JSON array is also accepted and converted on the fly;
- corpus: the character texts RAG and S2RD retrieve from. YAML list or JSONL of KECorpus. Given
  with `--set corpus=FILE`, else found beside the items as `<stem>.corpus.yaml|.jsonl`, else the
  distinct source chunks of the items stand in (the report says which);
- few-shot pool: YAML list of KECase (`--set few_shot=FILE`, default: the shipped pool).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from pydantic import Field, field_validator

from ...errors import InputError
from ...io import (atomic_path, check_file, file_sha256, read_jsonl, read_yaml, stable_hash, validate_yaml,
                   write_text_atomic)
from ..base import Authored, Dataset, interleave

CATEGORIES = ("event", "relational", "attitudinal", "identity")
CATEGORY_LABEL = {"event": "Event Memory", "relational": "Relational Memory",
                  "attitudinal": "Attitudinal Memory", "identity": "Identity Memory"}
CATEGORY_SHORT = {"event": "Eve.", "relational": "Rel.", "attitudinal": "Att.", "identity": "Ide."}
ERROR_TYPES = ("KKE", "UKE")

Category = Literal["event", "relational", "attitudinal", "identity"]
ErrorType = Literal["KKE", "UKE"]


def norm_category(v: Any) -> Any:
    """'Event Memory', 'event', 'Relation Memory' -> 'event' ...; anything else is left to fail."""
    if not isinstance(v, str):
        return v
    s = v.strip().lower().replace("memory", "").strip()
    return {"relation": "relational", "attitude": "attitudinal"}.get(s, s)


class KEItem(Authored):
    id: str
    character: str = Field(min_length=1)
    memory_id: str = Field(min_length=1)
    memory_category: Category
    error_type: ErrorType
    correct_memory: str = Field(min_length=1)
    false_memory: str = Field(min_length=1)
    query: str = Field(min_length=1)
    chunk: str = Field(min_length=1)
    explanation: str = ""
    correct_query: str | None = None        # the correct memory as a question (hidden-state analysis)
    topics: list[str] = Field(default_factory=list)   # UKE: the two sub-disciplines drawn

    @field_validator("id", "memory_id", mode="before")
    @classmethod
    def _str(cls, v):
        return str(v) if isinstance(v, int) else v

    @field_validator("memory_category", mode="before")
    @classmethod
    def _cat(cls, v):
        return norm_category(v)

    @field_validator("error_type", mode="before")
    @classmethod
    def _etype(cls, v):
        return v.strip().upper() if isinstance(v, str) else v


class KECorpus(Authored):
    character: str = Field(min_length=1)
    text: str = Field(min_length=1)


class KECase(Authored):
    """A few-shot case: an erroneous query and a good in-character reply to it."""

    id: str
    character: str
    error_type: ErrorType
    memory: str = Field(min_length=1)        # the true memory the query distorts
    query: str = Field(min_length=1)
    response: str = Field(min_length=1)


# -- sentences and chunks ---------------------------------------------------------------------
_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "c", "ca", "vs", "etc", "no", "vol", "pp", "p",
           "fig", "gen", "col", "lt", "sgt", "capt", "rev", "prof", "hon", "mt", "ft", "al", "e.g", "i.e"}
_SENT_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph; keeps abbreviations ("c. 470", "Dr. Watson") and initials together."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    out, start = [], 0
    for m in _SENT_END.finditer(text):
        before = text[start:m.start()].rstrip("\"'”’)]")
        tail = re.search(r"([A-Za-z.]+)$", before)
        last = tail.group(1).rstrip(".").lower() if tail else ""
        if last in _ABBREV or (len(last) == 1 and last.isalpha()):
            continue
        out.append(text[start:m.start()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def chunk_text(text: str, target: int = 8) -> list[str]:
    """Chunks of about `target` sentences that keep paragraphs whole where they can (paper §4.1).

    Paragraphs are separated by blank lines; a long paragraph is cut into near-equal parts, short
    neighbouring paragraphs are merged while the chunk stays within `target` sentences. A line
    starting with '#' (a title) is dropped.
    """
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip() and not p.strip().startswith("#")]
    chunks: list[list[str]] = []
    cur: list[str] = []
    for p in paras:
        sents = split_sentences(p)
        if not sents:
            continue
        if len(sents) > target + target // 2:
            if cur:
                chunks.append(cur)
                cur = []
            k = -(-len(sents) // target)
            size = -(-len(sents) // k)
            chunks.extend(sents[i:i + size] for i in range(0, len(sents), size))
        elif len(cur) + len(sents) <= target:
            cur = cur + sents
        else:
            if cur:
                chunks.append(cur)
            cur = list(sents)
    if cur:
        chunks.append(cur)
    return [" ".join(c) for c in chunks]


# -- files ------------------------------------------------------------------------------------
def starter_dir() -> Path:
    return Path(str(resources.files(__package__) / "data"))


STARTER_ITEMS = "starter.jsonl"


def load_items(path: str | Path, items: list[KEItem] | None = None) -> list[KEItem]:
    """Our JSONL items, checked; `items` are ones an importer read from another format (the suite
    passes RoleKE-Bench's; data never imports the importers)."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if items is None:
        items = read_jsonl(path, KEItem)
    check_items(items, str(path))
    return items


def check_items(items: list[KEItem], source: str) -> None:
    seen: set[str] = set()
    pairs: dict[str, KEItem] = {}
    for it in items:
        if it.id in seen:
            raise InputError(f"duplicate id '{it.id}'", file=source, field="id")
        seen.add(it.id)
        other = pairs.get(it.memory_id)
        if other is not None and (other.character != it.character or other.correct_memory != it.correct_memory):
            raise InputError(f"items '{other.id}' and '{it.id}' share memory_id '{it.memory_id}' but not "
                             "the same character and correct_memory", file=source, field="memory_id")
        pairs.setdefault(it.memory_id, it)


def load_corpus(path: str | Path) -> list[KECorpus]:
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        data = read_yaml(path)
        rows = validate_yaml(list[KECorpus], data, file=path)
    else:
        rows = read_jsonl(path, KECorpus)
    names = [r.character for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"character '{sorted(dup)[0]}' appears twice", file=str(path), field="character")
    return rows


def sibling_corpus(items_path: str | Path) -> Path | None:
    p = Path(items_path)
    for ext in (".corpus.yaml", ".corpus.yml", ".corpus.jsonl"):
        cand = p.with_name(p.stem + ext)
        if cand.exists():
            return cand
    return None


def load_cases(path: str | Path | None = None) -> list[KECase]:
    path = Path(path) if path else starter_dir() / "few_shot.yaml"
    return validate_yaml(list[KECase], read_yaml(path), file=path)


def load_topics(path: str | Path | None = None) -> list[str]:
    """Sub-disciplines for UKE injection (paper Appendix A.2): one a line, '#' comments."""
    path = check_file(Path(path) if path else starter_dir() / "subdisciplines.txt")     # a FIFO: one line
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    if len(out) < 2:
        raise InputError("need at least two topics", file=str(path))
    return out


def draw_topics(topics: list[str], key: str, seed: int = 0, k: int = 2) -> list[str]:
    """Two distinct topics, reproducible for a given memory and seed."""
    rng = random.Random(f"{seed}:{key}")
    return rng.sample(topics, k)


_LAST = ("source", "note", "validated")


def _ordered(d: dict) -> dict:
    """Provenance fields last, so files read naturally."""
    return {**{k: v for k, v in d.items() if k not in _LAST}, **{k: d[k] for k in _LAST if k in d}}


def items_to_jsonl(items: list[KEItem], path: str | Path) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:     # never through a link
        for it in items:
            fh.write(json.dumps(_ordered(it.model_dump(exclude_none=True)), ensure_ascii=False) + "\n")


def corpus_to_yaml(rows: list[KECorpus], path: str | Path) -> None:
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, s):
        style = "|" if "\n" in s else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)

    _Dumper.add_representer(str, _str)
    data = [{"character": r.character, **{k: v for k, v in _ordered(r.model_dump(exclude_none=True)).items()
                                            if k not in ("character", "text")}, "text": r.text} for r in rows]
    # Literal blocks cannot hold trailing spaces on a line: strip them (the text is prose).
    for d in data:
        d["text"] = "\n".join(line.rstrip() for line in d["text"].splitlines()).strip() + "\n"
    write_text_atomic(path, yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=100))


def corpora_chunks(corpus: list[KECorpus], target: int = 8) -> dict[str, list[str]]:
    return {c.character: chunk_text(c.text, target) for c in corpus}


def chunks_from_items(items: list[KEItem]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for it in items:
        lst = out.setdefault(it.character, [])
        if it.chunk not in lst:
            lst.append(it.chunk)
    return out


__all__ = ["KEItem", "KECorpus", "KECase", "CATEGORIES", "ERROR_TYPES", "CATEGORY_LABEL", "CATEGORY_SHORT",
           "split_sentences", "chunk_text", "load_items", "load_corpus", "load_cases", "load_topics",
           "draw_topics"]


def select_items(items: Sequence[KEItem], limit: int | None) -> list[KEItem]:
    """Whole KKE/UKE pairs, taken round-robin over characters and, inside a character, over
    memory categories, so a small --limit still spans characters and categories."""
    if not limit:
        return list(items)
    by_mem: dict[str, list] = {}
    for it in items:
        by_mem.setdefault(it.memory_id, []).append(it)
    per_char: dict[str, dict[str, list[str]]] = {}
    for mid, its in by_mem.items():
        per_char.setdefault(its[0].character, {}).setdefault(its[0].memory_category, []).append(mid)
    order = interleave([interleave(list(cats.values())) for cats in per_char.values()])
    picked: list = []
    for mid in order:
        if len(picked) >= limit:
            break
        picked += sorted(by_mem[mid], key=lambda x: x.error_type)[: limit - len(picked)]
    return picked


def stats_tables(dataset) -> list[tuple[str, Any]]:
    import pandas as pd

    items = dataset.items
    rows = []
    for ch in sorted({i.character for i in items}) + ["all"]:
        for et in ERROR_TYPES:
            its = [i for i in items if (ch == "all" or i.character == ch) and i.error_type == et]
            cnt = Counter(i.memory_category for i in its)
            rows.append({"character": ch, "error": et, **{CATEGORY_SHORT[c]: cnt.get(c, 0) for c in CATEGORIES},
                         "total": len(its)})
    counts = pd.DataFrame(rows)

    def cell(its):
        if not its:
            return "0"
        words = sum(len(i.query.split()) for i in its) / len(its)
        return f"{len(its)}/{words:.1f}"

    t1 = {}
    for c in list(CATEGORIES) + ["total"]:
        its = [i for i in items if c == "total" or i.memory_category == c]
        t1[CATEGORY_LABEL.get(c, "Total")] = {et: cell([i for i in its if i.error_type == et])
                                                 for et in ERROR_TYPES} | {"Total": cell(its)}
    table1 = pd.DataFrame.from_dict(t1, orient="index")
    table1.index.name = "memory category"
    corp = []
    for ch, chunks in sorted(dataset.extra.get("corpora", {}).items()):
        src = "item chunks" if ch in dataset.extra.get("corpus_from_items", []) else "corpus file"
        corp.append({"character": ch, "chunks": len(chunks), "words": sum(len(c.split()) for c in chunks),
                     "from": src})
    corpus = pd.DataFrame(corp).set_index("character") if corp else pd.DataFrame()
    return [("Items per character x error type x memory category (Table 5 layout)", counts),
            ("Items / mean words per query (Table 1 layout)", table1),
            (f"Retrieval corpora ({dataset.extra.get('corpus_file') or 'no corpus file'})", corpus)]


def load_dataset(data: str | None, opts, foreign: Callable[[Path], list[KEItem] | None] = lambda p: None) -> Dataset:
    """The items (--data: our JSONL, or what `foreign(path)` converts, e.g. a RoleKE-Bench file; else
    the starter set), each character's
    corpus chunks (--set corpus, else the items' sibling corpus file; characters without one take
    chunks of their items' own context) and the few-shot pool, hashed together with the chunk size."""
    target = opts.chunk_sentences
    if data:
        items_path, source = Path(data), str(data)
    else:
        items_path, source = starter_dir() / STARTER_ITEMS, "builtin:knowledge-errors/starter"
    items = load_items(items_path, foreign(items_path))
    corpus_path = Path(opts.corpus) if opts.corpus else sibling_corpus(items_path)
    if corpus_path is not None and not corpus_path.exists():
        raise InputError("corpus file not found", file=str(corpus_path), field="corpus")
    corpora = corpora_chunks(load_corpus(corpus_path), target) if corpus_path else {}
    from_items = chunks_from_items(items)
    fallback = sorted(c for c in from_items if not corpora.get(c))
    for c in fallback:
        corpora[c] = from_items[c]
    pool_path = Path(opts.few_shot) if opts.few_shot else starter_dir() / "few_shot.yaml"
    pool = load_cases(pool_path)
    digest = stable_hash([file_sha256(items_path), file_sha256(corpus_path) if corpus_path else None,
                          file_sha256(pool_path), target])
    return Dataset(items=items, source=source, hash=digest, extra={
        "corpora": corpora, "corpus_file": str(corpus_path) if corpus_path else None,
        "corpus_from_items": fallback, "few_shot_file": str(pool_path), "pool": pool})
