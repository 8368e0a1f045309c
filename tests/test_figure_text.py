"""Every figure the suites, `compare` and the card draw can be read: no text smaller than 8 pt, no
two texts drawn on top of each other (their window extents, from the figure's own renderer, do not
intersect), no legend on a plot (tests/figtext.py). The figures come from fake-backend runs that
draw each of them; the check itself is tested on figures made to fail it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rolebound import api
from rolebound.card.build import make_card
from rolebound.compare import compare_runs
from rolebound.report import builder
from rolebound.report.builder import subplots
from rolebound.store import RunDir

from figtext import drawn_texts, problems

TINY = {"charm": 40, "knowledge-errors": 8, "multiverse": 16, "capability": 4}
# the figures (by the function that draws them) these runs must have drawn
EXPECTED = {"_stacked", "_region_bars", "think_act_figure", "heatmap_figure", "accuracy_by_role_figure",
            "delta_figure", "_tsne_figure", "figure", "draw"}
LONG = ["openai:meta-llama/Llama-3.1-8B-Instruct", "openai:Qwen/Qwen2.5-7B-Instruct", "hf:/models/gemma-3-12b-it",
        "openai:gpt-4o-mini-2024-07-18", "vllm:mistralai/Mistral-7B-Instruct-v0.3", "bundled:smollm2-135m"]


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    """(drawing function, Figure) of every figure drawn by a run of each suite, a dialogue run,
    `compare` over six runs with long model names, and a card."""
    root = tmp_path_factory.mktemp("figs")
    mp = pytest.MonkeyPatch()
    mp.setenv("ROLEBOUND_DERIVED_DIR", str(root / "derived"))      # draw every figure, none from the cache
    drawn: list[tuple[str, object]] = []
    save = builder._save

    def keep(fig, dpi):
        if not isinstance(fig, bytes):
            drawn.append((keep.fn, fig))
        return save(fig, dpi)

    def png(fig, dpi=110):
        keep.fn = fig.fn.__name__ if isinstance(fig, builder.Drawing) else "?"
        return real_png(fig, dpi)

    real_png = builder.png
    mp.setattr(builder, "_save", keep)
    mp.setattr(builder, "png", png)
    import rolebound.card.render as render
    import rolebound.dialogue.report as dialogue

    mp.setattr(render, "png", png)
    mp.setattr(dialogue, "figure_png", png)
    try:
        for suite in ("knowledge-errors", "multiverse", "capability"):
            api.run(suite, model="fake:random", limit=TINY[suite] * 2, out=root / suite, progress=False)
        api.run("charm", model="fake:random", strategies="dialogue", limit=20, out=root / "dialogue",
                progress=False)
        first = api.run("charm", model="fake:random", limit=40, out=root / "charm", progress=False).run_dir
        runs = []
        for i, model in enumerate(LONG):        # the same run under six long model names
            d = shutil.copytree(first, root / f"charm{i}")
            m = RunDir(d).read_manifest()
            m.model = model
            RunDir(d).write_manifest(m)
            recs = Path(d) / "records.jsonl"       # its records name the same model (else: mixed runs)
            recs.write_text("".join(json.dumps({**json.loads(x), "model": model}) + "\n"
                                    for x in recs.read_text().splitlines() if x.strip()))
            runs.append(d)
        compare_runs(runs, root / "compare")
        make_card("fake:random", out=root / "card", limits=TINY, progress=False, say=lambda *a: None)
    finally:
        mp.undo()
    return drawn


@pytest.mark.slow
def test_every_figure_is_readable(figures):
    assert EXPECTED <= {fn for fn, _ in figures}
    bad = {}
    for fn, fig in figures:
        p = problems(fig)
        if p:
            bad.setdefault(fn, p)
    assert bad == {}


def test_the_check_sees_small_overlapping_text_and_a_legend_on_the_plot():
    fig, ax = subplots(figsize=(3, 2))
    ax.bar(["a", "b"], [100, 90], label="bars")
    ax.legend(loc="upper right")
    ax.text(0, 50, "tiny", fontsize=6)
    ax.text(0, 50, "on top", fontsize=9)
    ax.set_xticks([0, 0.02], ["openai:some-long-model-name", "openai:another-long-model-name"])
    found = problems(fig)
    assert "'tiny' is 6.0 pt (< 8.0)" in found
    assert "'tiny' overlaps 'on top'" in found
    assert "'openai:some-long-model-name' overlaps 'openai:another-long-model-name'" in found
    assert any("legend (bars) sits on the plot" in p for p in found)
    texts, _ = drawn_texts(fig)
    assert {t for t, _, _ in texts} >= {"tiny", "on top", "bars"}


def test_a_clean_figure_passes():
    fig, ax = subplots(figsize=(4, 3))
    ax.bar(["a", "b"], [1, 2], label="bars")
    ax.set_title("title", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    assert problems(fig) == []
