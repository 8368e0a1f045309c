"""The hidden-state analysis of knowledge-errors (Figure 4): after the run, the top-layer states of
the correct, KKE and UKE query of each memory, saved beside the records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ...errors import InputError
from ...io import open_regular, stable_hash
from ...models.base import CHAT_TEMPLATE, HIDDEN
from ...records import Message
from .data import ERROR_TYPES, KEItem
from .prompts import VANILLA
from .report import HIDDEN_FILE, RETRIEVAL_FILE
from .strategies import USES_RETRIEVAL


def hidden_mode(value) -> str:
    v = str(value).lower()
    if v in ("1", "true", "yes", "on"):
        return "run"
    if v in ("0", "false", "no", "off"):
        return "off"
    if v == "all":
        return "all"
    raise InputError("must be true, false or all", field="--set hidden_states")


async def save_hidden_states(backend, items: Sequence[KEItem], path: Path) -> None:
    """Top-layer last-token states of the correct, KKE and UKE query of each memory (Figure 4),
    each wrapped in the vanilla role prompt. Queries are used when every memory has a
    `correct_query`; otherwise all three are the first-person memory statements, so the three
    kinds always share one form."""
    import numpy as np

    mems: dict[str, dict[str, Any]] = {}
    for it in items:
        m = mems.setdefault(it.memory_id, {"character": it.character, "category": it.memory_category,
                                           "correct_query": it.correct_query, "correct_memory": it.correct_memory})
        m[it.error_type] = it
    mems = {k: v for k, v in mems.items() if "KKE" in v or "UKE" in v}
    if not mems:
        return
    use_queries = all(v["correct_query"] for v in mems.values())
    rows = []
    for mid, v in mems.items():
        rows.append((mid, v, "correct", v["correct_query"] if use_queries else v["correct_memory"]))
        for et in ERROR_TYPES:
            if et in v:
                rows.append((mid, v, et, v[et].query if use_queries else v[et].false_memory))
    texts = [VANILLA.format(role_name=v["character"], given_query=t) for _, v, _, t in rows]
    chat = backend.supports(CHAT_TEMPLATE)
    # keyed before rendering: checking a finished run's file must not load the model
    key = stable_hash([backend.spec, texts, chat])
    if path.exists():
        try:
            with open_regular(path) as fh, np.load(fh, allow_pickle=False) as old:     # a FIFO: one line
                if str(old["key"]) == key:
                    return
        except (OSError, KeyError, ValueError):
            pass
    if chat:
        texts = [backend.render_chat([Message(role="user", content=t)]) for t in texts]
    vecs = np.asarray(await backend.hidden_states(texts), dtype=np.float32)
    np.savez_compressed(path, vectors=vecs, memory_id=np.array([r[0] for r in rows]),
                        character=np.array([r[1]["character"] for r in rows]),
                        category=np.array([r[1]["category"] for r in rows]),
                        kind=np.array([r[2] for r in rows]), mode=np.array("query" if use_queries else "memory"),
                        model=np.array(backend.spec), key=np.array(key))


async def after_run(session, dataset, settings, hidden_states, select) -> None:
    """retrieval.json (what the retrieving methods used) and, when asked, the hidden states."""
    run_dir = session.run_dir.path
    info = {"corpus_file": dataset.extra.get("corpus_file"),
            "corpus_from_items": dataset.extra.get("corpus_from_items", []),
            "few_shot_file": dataset.extra.get("few_shot_file"),
            "chunks": {c: len(v) for c, v in dataset.extra.get("corpora", {}).items()}}
    if USES_RETRIEVAL & set(settings.strategies) and settings.state.methods is not None:
        info["embedder"] = settings.state.methods.retriever.name
    (run_dir / RETRIEVAL_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False), encoding="utf-8")
    mode = hidden_mode(hidden_states)
    if mode == "off":
        return
    backend = session.backend
    if not backend.supports(HIDDEN):
        (run_dir / HIDDEN_FILE).unlink(missing_ok=True)
        return
    items = dataset.items if mode == "all" else select(dataset.items, settings.limit)
    await save_hidden_states(backend, items, run_dir / HIDDEN_FILE)
