"""`rolebound build charm` and `rolebound build charm-review`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(build_app: typer.Typer, data_app: typer.Typer) -> None:
    @build_app.command("charm")
    def build_charm(
        characters: Path = typer.Option(..., "--characters", help="YAML: regions, characters, concepts and facts "
                                        "(question + correct answer; distractors optional)"),
        generator: str = typer.Option("bundled", "--generator", help="model that writes distractors, BACKEND:NAME"),
        out: Path = typer.Option(Path("charm_build"), "--out", "-o", help="output folder"),
        threshold: float = typer.Option(0.9, "--threshold", help="cosine at which a distractor is a near-duplicate"),
        embedder: Optional[str] = typer.Option(None, "--embedder", help="local sentence-transformers folder"),
        base_url: Optional[str] = typer.Option(None, "--base-url"),
        max_tokens: int = typer.Option(256, "--max-tokens"),
        quiet: bool = typer.Option(False, "--quiet", "-q"),
    ):
        """Two-stage distractor generation (Table 21), near-duplicate removal, review sheet (Table 22)."""
        from ...records import Decoding
        from .build import build

        opts = {"base_url": base_url} if base_url else {}
        res = build(characters, generator, out, threshold=threshold, embedder=embedder, progress=not quiet,
                    decoding=Decoding(max_tokens=max_tokens), backend_options=opts)
        print(f"{res['complete']}/{res['questions']} questions complete "
              f"({res['kept_given']} had distractors, {res['near_duplicates']} near-duplicates dropped, "
              f"{len(res['incomplete'])} incomplete); model calls {res['model_calls']}")
        print(f"data: {res['data']}\nreview sheet: {res['review_sheet']}")

    @build_app.command("charm-review")
    def charm_review(
        sheet_a: Path = typer.Argument(..., help="first reviewer's filled review_sheet.csv"),
        sheet_b: Path = typer.Argument(..., help="second reviewer's filled review_sheet.csv"),
        data: Path = typer.Option(..., "--data", help="the charm_built.yaml the sheets review"),
        out: Path = typer.Option(..., "--out", "-o", help="accepted items, loadable with --data"),
    ):
        """Cohen's kappa per region (Table 13); keep the items both reviewers accept."""
        from .build import review

        res = review(sheet_a, sheet_b, data, out)
        print(f"{res['accepted']}/{res['reviewed']} items accepted by both reviewers -> {res['out']}")
        print("Cohen's kappa on accept/reject (per criterion in brackets):")
        for reg, k in res["kappa"].items():
            crit = ", ".join("-" if k[c] is None else f"{k[c]:.2f}" for c in ("criterion_1", "criterion_2",
                                                                             "criterion_3", "criterion_4"))
            acc = "-" if k["accept"] is None else f"{k['accept']:.2f}"
            print(f"  {reg:12s} n={k['n']:4d}  kappa={acc}  [{crit}]")
