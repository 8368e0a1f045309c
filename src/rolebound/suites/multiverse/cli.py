"""`rolebound build multiverse`: distractors for expert canon questions, diversified dilemmas, a review sheet."""

from __future__ import annotations

from pathlib import Path

import typer


def build_multiverse(
    seeds: Path = typer.Argument(..., help="YAML: heroes (with versions) and canon_seeds (question + true answer)"),
    out: Path = typer.Option(..., "--out", "-o", help="folder for dataset.yaml, review.csv and generation.jsonl"),
    model: str = typer.Option("bundled", "--model", "-m", help="generator BACKEND:NAME"),
    per_type: int = typer.Option(3, "--dilemmas-per-type", min=0, help="dilemmas per version and conflict type"),
    no_canon: bool = typer.Option(False, "--no-canon", help="skip the canon distractors"),
    no_dilemmas: bool = typer.Option(False, "--no-dilemmas", help="skip dilemma generation"),
    temperature: float = typer.Option(0.9, "--temperature", help="paper Table 5: 0.9 for generation"),
    seed: int = typer.Option(0, "--seed"),
    max_tokens: int = typer.Option(512, "--max-tokens"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start again in an --out that holds another build"),
):
    """Build multiverse items from expert seeds; everything generated is validated: false."""
    from .build import run_build

    res = run_build(seeds, out, model=model, per_type=per_type, canon=not no_canon,
                    dilemmas=not no_dilemmas and per_type > 0, temperature=temperature, seed=seed,
                    max_tokens=max_tokens, overwrite=overwrite, progress=True)
    print(f"wrote {res['out']}/dataset.yaml: {res['canon']} canon questions, {res['dilemmas']} dilemmas; "
          f"{res['failed']} generations failed to parse (listed in review.csv)")
    print(f"review sheet: {res['out']}/review.csv; prompts and replies: {res['out']}/generation.jsonl")
    print(f"{res['model_calls']} model calls, {res['cache_hits']} from the cache, {res['resumed']} resumed "
          f"(records: {res['records']}; the same --out resumes)")


def register(build_app, data_app) -> None:
    build_app.command("multiverse")(build_multiverse)
