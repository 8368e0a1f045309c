"""The `echo` suite: repeat a word. Small enough to read in one sitting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from rolebound.io import stable_hash
from rolebound.stats import rate_ci
from rolebound.records import Message
from rolebound.report.builder import Report
from rolebound.suites import register_suite
from rolebound.suites.base import Dataset, Item, Options, RunSettings, Suite

# Our own words (no benchmark data); two are palindromes, so `reverse` gets exactly those right.
WORDS = ["apple", "level", "river", "noon", "candle", "garden", "pepper", "window"]


class EchoItem(Item):
    word: str


class EchoOptions(Options):
    shout: bool = Field(False, description="ask for the word in capitals")


@register_suite("echo")
class EchoSuite(Suite):
    description = "repeat a word (an example plugin suite)"
    strategies = {"plain": "the word alone", "polite": "the word with a please"}
    default_strategies = ["plain"]
    options_model = EchoOptions
    on_card = True          # `rolebound card` runs it too (its whole list: no card_limit)

    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        words = Path(data).read_text(encoding="utf-8").split() if data else WORDS
        items = [EchoItem(id=f"w{i:02d}", word=w) for i, w in enumerate(words)]
        return Dataset(items=items, source=data or "builtin:echo", hash=stable_hash(words))

    def prompt_templates(self) -> dict[str, str]:
        return {"system": SYSTEM}

    async def run_item(self, item: EchoItem, ctx, strategy: str, settings: RunSettings) -> None:
        shout = settings.options.shout
        gold = item.word.upper() if shout else item.word
        text = item.word if strategy == "plain" else f"{item.word}, please"
        system = SYSTEM + (" Use capital letters." if shout else "")
        await ctx.chat("answer", [Message(role="system", content=system), Message(role="user", content=text)],
                       parse=lambda r: r.strip().removesuffix(", please"), gold=gold, max_tokens=8)

    # Metrics are a pure function of the records: `rolebound report` recomputes them.
    def metrics(self, records, manifest) -> dict[str, Any]:
        out: dict[str, Any] = {"by_strategy": {}}
        for strat in manifest.strategies:
            recs = [r for r in records if r.strategy == strat and r.stage == "answer" and r.error is None]
            out["by_strategy"][strat] = rate_ci([bool(r.correct) for r in recs])
        out["failed_calls"] = sum(1 for r in records if r.error)
        return out

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        return [(f"echoed % ({s})", f"{m['rate']:.1f}") for s, m in metrics["by_strategy"].items()]

    # Its part of the report; rolebound.report.build adds the run's facts and writes report.md/html.
    def report(self, metrics, records, manifest, run_dir) -> Report:
        rep = Report(f"echo run: {manifest.model}")
        rep.table("Echoed (%, 95% bootstrap CI)", ["strategy", "n", "echoed", "CI low", "CI high"],
                  [[s, m["n"], m["rate"], m["lo"], m["hi"]] for s, m in metrics["by_strategy"].items()])
        return rep

    # `rolebound card`: the headline figures, from metrics.json alone.
    def card_figures(self, metrics) -> dict[str, Any]:
        from rolebound.report.fmt import rate

        figs = [rate(f"echoed_{s}", f"echoed % ({s})", m) for s, m in metrics["by_strategy"].items()]
        return {"title": "echo: repeat a word", "figures": figs, "finding": "", "chart": None}

    # `rolebound build echo WORDS... --out FILE`: a word list that --data reads.
    def build_commands(self, app) -> None:
        import typer

        @app.command("echo", epilog="Examples:\n\n\b\n  rolebound build echo noon kayak tree --out words.txt\n"
                                    "  rolebound run echo -m reverse --data words.txt")
        def build_echo(words: list[str] = typer.Argument(..., help="the words to ask for"),
                       out: Path = typer.Option(..., "--out", "-o", help="word list to write")):
            """Write a word list for `rolebound run echo --data FILE`."""
            out.write_text(" ".join(words) + "\n", encoding="utf-8")
            print(f"wrote {len(words)} words to {out}")


SYSTEM = "Repeat the user's word exactly and say nothing else."
