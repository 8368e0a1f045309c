"""Importers for the knowledge-errors suite.

    rolebound data import roleke-bench RoleKE-Bench.json --out data/roleke.jsonl
    rolebound data import character-llm-profiles profiles/ --out data/roleke.corpus.yaml

RoleKE-Bench (github.com/WYRipple/rp_kw_errors) is a JSON array of records with uuid, role_name,
memory_category, correct_memory, false_memory, change_category (KKE/UKE), memory_chunk and
false_query_question; KKE/UKE pairs share correct_memory and memory_chunk. It has no explanation
field, so `explanation` stays empty (the judges of Tables 14-15 only need the correct memory). The
text is kept as written; the labels are renamed to the suite's: memory_category 'Event Memory',
'Relational Memory', 'Attitudinal Memory', 'Identity Memory' -> event, relational, attitudinal,
identity (the import prints each rename with its count; prompts.py names them as the paper does).
The Character-LLM profiles (github.com/choosewhatulike/trainable-agents,
data/seed_data/profiles/wiki_*.txt) are the Wikipedia texts those chunks come from; imported as
corpora they feed RAG and S2RD. Name the corpus `<items stem>.corpus.yaml` to have `--data` find
it, or pass `--set corpus=FILE`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ...errors import InputError
from ...importers import writes
from ...io import check_file, json_loads, stable_hash, validate_record

ROLEKE_FIELDS = ("uuid", "role_name", "memory_category", "correct_memory", "false_memory", "change_category",
                 "memory_chunk", "false_query_question")
ROLEKE_SOURCE = "RoleKE-Bench (github.com/WYRipple/rp_kw_errors, Zhang et al. 2024)"


def _json_array_with_lines(path: Path) -> list[tuple[int, object]]:
    """The elements of a JSON array with the line each starts on (for error messages)."""
    text = path.read_text(encoding="utf-8")
    dec = json.JSONDecoder()
    i = len(text) - len(text.lstrip())
    if not text[i:i + 1] == "[":
        raise InputError("expected a JSON array of records", file=str(path), line=1)
    i += 1
    out = []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            raise InputError("unterminated JSON array", file=str(path), line=text.count("\n") + 1)
        if text[i] == "]":
            break
        line = text.count("\n", 0, i) + 1
        try:
            obj, i = dec.raw_decode(text, i)
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise InputError("invalid JSON: nested too deep", file=str(path), line=line) from None
        except UnicodeEncodeError:
            raise InputError("invalid JSON: half a surrogate pair (\\udXXX alone), not a character",
                             file=str(path), line=line) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
        out.append((line, obj))
    return out


def looks_like_roleke(path: Path) -> bool:
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with path.open(encoding="utf-8") as fh:
        head = fh.read(2000)
    return head.lstrip().startswith("[") and "false_query_question" in head


def roleke_or_none(path: Path) -> list | None:
    """`--data` given a RoleKE-Bench file: its items converted; None for our own JSONL."""
    return roleke_items(path) if looks_like_roleke(Path(path)) else None


def roleke_items(path: str | Path, labels: Counter | None = None) -> list:
    """The records as KEItems. The memory types become the suite's labels ('Attitudinal Memory' ->
    'attitudinal', data.norm_category); `labels` counts each (field, release's label, ours) that differs."""
    from .data import KEItem

    path = check_file(path)
    if path.suffix.lower() == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as fh:
            for n, raw in enumerate(fh, 1):
                if raw.strip():
                    try:
                        rows.append((n, json_loads(raw)))
                    except json.JSONDecodeError as exc:
                        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=n) from None
    else:
        rows = _json_array_with_lines(path)
    items = []
    for line, rec in rows:
        if not isinstance(rec, dict):
            raise InputError("expected an object", file=str(path), line=line)
        for k in ROLEKE_FIELDS:
            if k not in rec or not isinstance(rec[k], str) or not rec[k].strip():
                raise InputError("missing or empty", file=str(path), line=line, field=k)
        mem = stable_hash([rec["role_name"], rec["memory_category"], rec["correct_memory"], rec["memory_chunk"]], 12)
        data = {"id": rec["uuid"], "character": rec["role_name"], "memory_id": f"m-{mem}",
                "memory_category": rec["memory_category"], "error_type": rec["change_category"],
                "correct_memory": rec["correct_memory"], "false_memory": rec["false_memory"],
                "query": rec["false_query_question"], "chunk": rec["memory_chunk"], "explanation": "",
                "source": ROLEKE_SOURCE,
                "note": "imported verbatim; screened by the dataset's authors, not re-validated by rolebound; "
                        "the public file has no explanation field",
                "validated": False}
        item = validate_record(KEItem, data, file=path, line=line)
        if labels is not None:
            for key, raw in (("memory_category", rec["memory_category"]), ("error_type", rec["change_category"])):
                if raw != getattr(item, key):
                    labels[(key, raw, getattr(item, key))] += 1
        items.append(item)
    return items


@writes(".jsonl", kind="JSON Lines")
def import_roleke(src: str, out: str) -> str:
    from .data import check_items, items_to_jsonl

    labels: Counter = Counter()
    items = roleke_items(src, labels)
    check_items(items, src)
    items_to_jsonl(items, out)
    chars = Counter(i.character for i in items)
    types = Counter(i.error_type for i in items)
    lines = [f"wrote {len(items)} items ({types['KKE']} KKE, {types['UKE']} UKE; {len(chars)} characters) to {out}; "
             f"see the counts with: rolebound data stats knowledge-errors --data {out}"]
    lines += [f"  renamed: {key} '{raw}' -> '{new}' ({n} items)" for (key, raw, new), n in sorted(labels.items())]
    return "\n".join(lines)


def profile_corpora(src: str | Path) -> list:
    """One corpus per `wiki_*.txt` (or any .txt) file; the character is the file's '# Title' line."""
    from .data import KECorpus

    src = Path(src)
    if not src.exists():
        raise InputError("not found", file=str(src))
    files = (sorted(src.glob("wiki_*.txt")) or sorted(src.glob("*.txt"))) if src.is_dir() else [src]
    if not files:
        raise InputError("no profile .txt files here", file=str(src))
    out = []
    for f in files:
        text = check_file(f).read_text(encoding="utf-8")
        lines = text.splitlines()
        if not lines or not lines[0].startswith("#"):
            raise InputError("expected a '# Character name' title on the first line", file=str(f), line=1)
        name = lines[0].lstrip("#").strip()
        body = "\n".join(lines[1:]).strip()
        if not name or not body:
            raise InputError("empty title or text", file=str(f), line=1)
        out.append(KECorpus(character=name, text=body,
                            source=f"Character-LLM profile {f.name} (github.com/choosewhatulike/trainable-agents; "
                                   "Wikipedia text, CC BY-NC 4.0 data licence)",
                            note="imported verbatim", validated=False))
    names = [c.character for c in out]
    if len(set(names)) != len(names):
        raise InputError("two profiles share a title", file=str(src))
    return out


@writes(".yaml", ".yml", ".jsonl", kind="YAML, or JSON Lines for *.jsonl")
def import_profiles(src: str, out: str) -> str:
    from .data import chunk_text, corpus_to_yaml

    rows = profile_corpora(src)
    if out.endswith(".jsonl"):
        with open(out, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r.model_dump(exclude_none=True), ensure_ascii=False) + "\n")
    else:
        corpus_to_yaml(rows, out)
    n_chunks = sum(len(chunk_text(r.text)) for r in rows)
    return (f"wrote {len(rows)} character corpora ({n_chunks} chunks of about 8 sentences) to {out}: "
            + ", ".join(r.character for r in rows))


IMPORTERS = {
    "roleke-bench": (import_roleke, "RoleKE-Bench JSON (knowledge-errors items: KKE/UKE queries)"),
    "character-llm-profiles": (import_profiles,
                               "Character-LLM wiki_*.txt profiles (knowledge-errors corpora for RAG/S2RD)"),
}
