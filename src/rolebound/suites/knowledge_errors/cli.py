"""`rolebound build knowledge-errors`: corpus -> memories -> KKE/UKE queries (Tables 8-13)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def build_knowledge_errors(
    corpus: str = typer.Argument(..., help="corpus YAML/JSONL (character, text, source), or a folder of "
                                           "Character-LLM wiki_*.txt profiles"),
    out: Path = typer.Option(..., "--out", "-o", help="items JSONL to write (the corpus is copied beside it as "
                                                      "<stem>.corpus.yaml; records go to <stem>.build/)"),
    model: str = typer.Option("bundled", "--model", "-m", help="generator model BACKEND:NAME"),
    characters: Optional[str] = typer.Option(None, "--characters", help="only these, comma-separated"),
    max_chunks: Optional[int] = typer.Option(None, "--max-chunks", min=1, help="chunks per character"),
    max_memories: Optional[int] = typer.Option(None, "--max-memories", min=1, help="memories per chunk"),
    chunk_sentences: int = typer.Option(8, "--chunk-sentences", min=1, help="sentences per chunk (paper: ~8)"),
    max_kke_spans: int = typer.Option(2, "--max-kke-spans", min=1,
                                      help="changed word spans a KKE edit may have before it counts as >1 error"),
    correct_queries: bool = typer.Option(True, "--correct-queries/--no-correct-queries",
                                         help="also turn each correct memory into a question (hidden-state analysis)"),
    topics: Optional[str] = typer.Option(None, "--topics", help="sub-discipline list (default: the shipped one)"),
    seed: int = typer.Option(0, "--seed", help="topic draws and sampling seed"),
    temperature: Optional[float] = typer.Option(None, "--temperature"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env"),
    dtype: Optional[str] = typer.Option(None, "--dtype"),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1),
    no_cache: bool = typer.Option(False, "--no-cache"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start the build folder again"),
):
    """Build knowledge-errors items (KKE and UKE yes/no queries) from character corpora."""
    from ...records import Decoding
    from .build import BuildOptions, run_build

    dec = Decoding().merged(temperature=temperature, max_tokens=max_tokens, seed=seed)
    bopts = {k: v for k, v in dict(base_url=base_url, api_key_env=api_key_env, dtype=dtype,
                                   concurrency=concurrency).items() if v is not None}
    opts = BuildOptions(chunk_sentences=chunk_sentences, max_chunks=max_chunks, max_memories=max_memories,
                        max_kke_spans=max_kke_spans, correct_queries=correct_queries, seed=seed)
    chars = [c.strip() for c in characters.split(",") if c.strip()] if characters else None
    res, paths = run_build(corpus, str(out), model=model, characters=chars, opts=opts, topics_file=topics,
                           decoding=dec, backend_options=bopts, use_cache=not no_cache, overwrite=overwrite,
                           concurrency=concurrency)
    from rich.console import Console
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
    Console().print(t)
    if res.counts.get("failed_calls"):
        raise typer.Exit(3)


def register(build_app, data_app) -> None:
    build_app.command("knowledge-errors")(build_knowledge_errors)
