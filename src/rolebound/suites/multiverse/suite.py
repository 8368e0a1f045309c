"""Beyond One World: superhero role-play across canon versions (Ngokpol et al., 2025).

Tasks
- canon: four-option questions on a version's life phases (childhood, pre-hero, hero).
- dilemma: two-choice moral dilemmas of four conflict types; choice A is always the type's first
  pole ("Save the One You Love", "Hero", "Duty", "The Ends Justify the Means").

Strategies
- direct, cot: the paper's prompts without / with "Let's think step by step." (Table 3).
- cross-direct, cross-cot: each question asked of every *other* version of the same hero
  (Section 4.1.2, Tables 9 and 11); the played version's own answer is recorded where the
  versions share a question, so the report can say whose answer the model gave.
Reasoning analysis (direct/cot replies with text): an LLM segmenter splits the reply into
<thinking>/<acting> spans, a judge scores both 0-5 given the character's attributes, and
Think-Act Matching (max embedding cosine over the pairs) is computed when the segmenter's reply is
parsed, so it is stored in that record (`parsed.tam`). Our additions, reported apart from the
paper's protocol: a rule-based segmenter where the LLM's segmentation is invalid
(segment_fallback=rules) and judge scores read by log-likelihood (judge_scoring=logprob). See
docs/multiverse.md.

This module wires the suite; the data is in data.py, the model calls in strategies.py, the
metrics in metrics.py, the report in report.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...errors import InputError
from ...io import stable_hash
from .prompts import TEMPLATES
from .. import register_suite
from ..base import DIALOGUE, Dataset, HubInfo, RunSettings, Suite, lazy_hook
from .card import card_figures
from .report import compare_tables, summary_lines, report_sections
from .strategies import STRATEGIES, extractor_for
from ...protocol import Protocol
from .options import MultiverseOptions, MultiverseState
from .data import STARTER, MVIndex, dataset_tables, load_file, select_items


def _choice(opts: dict, key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    v = opts.get(key)
    if v is None or str(v).strip() == "":
        return default or allowed[0]
    v = str(v).strip().lower()
    if v not in allowed:
        raise InputError(f"{key} must be {' or '.join(allowed)}, not {v!r}", field=key)
    return v


@register_suite("multiverse")
class MultiverseSuite(Suite):
    description = "superhero versions: canon events by life phase, moral dilemmas, cross-version (Beyond One World)"
    default_strategies = ["direct", "cot", "cross-direct"]
    # a hero's versions share its questions, and a dilemma type is asked of a version in several
    # iterations: a dilemma clusters by version and conflict type, a canon question by hero
    clusters = {"*": ("version+conflict", "hero")}
    headline = (("canon accuracy, direct", "strategies.direct.canon.acc", "answer"),
                ("dilemma accuracy, direct", "strategies.direct.dilemma.acc", "answer"),
                ("canon accuracy, cot", "strategies.cot.canon.acc", "answer"))
    offers_scoring = True
    options_model = MultiverseOptions
    state_class = MultiverseState
    card_limit = 96
    # Beyond One World's release states no licence: local use only
    hub = HubInfo(config_field="task", configs={"canon": "canon", "dilemma": "dilemmas"},
                  pretty_name="Beyond One World (rolebound build)",
                  citation="@misc{ngokpol2025beyond,\n  title = {Beyond One World: Benchmarking Super Heros in "
                           "Role-Playing Across Multiversal Contexts},\n  author = {Ngokpol, Perapard and Kerdthaisong, Kun "
                           "and Buakhaw, Pasin and others},\n  year = {2025}\n}",
                  source_datasets=("Beyond One World release (no licence stated)",))
    # Appendix B: answers at temperature 0.6 with 1024 output tokens (Table 4); the judge (Sonnet 3.7)
    # at 0.1 / 1024 (Table 4), as is the segmenter (GPT-4o-mini tags, Table 5). top_p is not given.
    protocol = Protocol(source="Beyond One World Appendix B, Tables 4-5", scoring="generate",
                        decoding={"temperature": 0.6, "max_tokens": 1024},
                        judge_decoding={"temperature": 0.1, "max_tokens": 1024},
                        judge_required=True, judge_separate=True,
                        notes="judge and segmenter read with judge decoding; the judge reads the segmented "
                              "thinking/acting spans (Section 4.2)")

    # Its hooks, from its own modules; build.py and importers.py load only when called.
    strategies = STRATEGIES
    extractor_for = staticmethod(extractor_for)
    report = staticmethod(report_sections)
    summary = staticmethod(summary_lines)
    compare = staticmethod(compare_tables)
    card_figures = staticmethod(card_figures)
    build_commands = lazy_hook(".build", "commands")
    pairs = lazy_hook(".pairs", "make_pairs")              # `rolebound data pairs` (pairs.py)
    importers = lazy_hook(".importers", "IMPORTERS")

    # -- data -----------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        path = Path(data) if data else STARTER
        loaded = load_file(path)
        tasks = settings.options.tasks
        items = loaded["items"]
        if tasks:
            wanted = _task_set(tasks)
            bad = wanted - {"canon", "dilemma"}
            if bad:
                raise InputError(f"unknown task '{sorted(bad)[0]}'; use canon and/or dilemma", field="--set tasks")
            items = [it for it in items if it.task in wanted]
        index = settings.state.index = MVIndex(loaded)
        settings.state.items = items       # the dialogue's `items` warm-up
        payload = {"heroes": [h.model_dump() for h in loaded["heroes"]], "items": [it.model_dump() for it in items]}
        return Dataset(items=items, source="builtin:multiverse-starter" if not data else str(path),
                       hash=stable_hash(payload), extra={"index": index, "import_report": loaded["import_report"]})

    def select(self, items: Sequence[Any], limit: int | None, settings: RunSettings | None = None) -> list[Any]:
        """Round-robin over versions (hero by hero), each version cycling through canon phases and
        dilemma types, so a small --limit still covers several versions of one hero."""
        chosen = select_items(items, limit, settings.state.index if settings is not None else None)
        if settings is not None and DIALOGUE in settings.strategies and settings.state.dialogue_backend is not None:
            from ...dialogue import budget
            from .strategies import dialogue_probes

            budget.check_context(settings.state.dialogue_backend,
                                 [p for it in chosen for p in dialogue_probes(self, it, settings)], settings.options)
        return chosen

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        return dataset_tables(dataset)

    def prompt_templates(self) -> dict[str, str]:
        return dict(TEMPLATES)

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        from ...models.base import CHAT, LOGPROB

        opts = settings.options.given()     # as given: the modes below resolve into it
        if DIALOGUE in settings.strategies:
            from ...dialogue import budget

            budget.setup(settings, backend)
        if settings.scoring == "logprob":
            backend.require(LOGPROB, "--scoring logprob")
        if settings.scoring == "generate" or any("cot" in s for s in settings.strategies):
            backend.require(CHAT, "generated answers and CoT")
        if self.analysis_on(settings):
            # the resolved choices go into the manifest's options
            settings.resolve("judge_scoring", self.judge_scoring(opts, judge or backend))
            settings.resolve("segment_fallback", _choice(opts, "segment_fallback", ("rules", "none")))
            (judge or backend).require(CHAT, "the segmenter" + (" and the judge" if opts["judge_scoring"] == "generate"
                                                                else ""))
            if not opts.get("embedder"):
                # Think-Act Matching on the paper's all-mpnet-base-v2 when its PyPI parts are
                # installed; all-MiniLM-L6-v2 is the named fallback (the report says so)
                from ...scoring.embeddings import default_path, mpnet_available

                settings.resolve("embedder", "mpnet" if mpnet_available() else "minilm")
                if opts["embedder"] == "minilm":
                    default_path()   # fails early, with the install hint, if the embedder is missing

    def judge_scoring(self, opts: dict, judge) -> str:
        """How the 0-5 judge is read: `judge_scoring` if set, else the rule of --scoring (logprob on
        the demo models, generate on every other model)."""
        from ...models.base import LOGPROB

        mode = _choice(opts, "judge_scoring", ("generate", "logprob"), default=self.default_scoring(judge))
        if mode == "logprob":
            judge.require(LOGPROB, "judge_scoring=logprob; use --set judge_scoring=generate or another --judge")
        return mode

    def option_departures(self, options: dict[str, Any]) -> list[str]:
        out = []
        tasks = options.get("tasks")
        if tasks:
            wanted = _task_set(tasks)
            if wanted != {"canon", "dilemma"}:
                out.append(f"tasks={','.join(sorted(wanted))} only (the paper asks canon events and moral dilemmas)")
        if options.get("analysis") is False:
            out.append("analysis=false: no thinking/acting analysis (no segmenter, judge scores or TAM)")
        return out

    def judge_enabled(self, settings: RunSettings, backend, judge=None) -> bool:
        return self.analysis_on(settings)    # the segmenter and the judge only run for the analysis

    def analysis_on(self, settings: RunSettings) -> bool:
        """Thinking/acting analysis needs reply text: CoT always has it, direct only when generated."""
        texts = "cot" in settings.strategies or ("direct" in settings.strategies and settings.scoring == "generate")
        return texts and settings.options.analysis

    # -- work -----------------------------------------------------------------------------------
    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        settings.state.index = dataset.extra["index"]
        if DIALOGUE in settings.strategies:     # a dialogue's simulated user (check() kept it)
            from ...dialogue import budget

            budget.attach(session, settings)
        if self.analysis_on(settings):
            from ...scoring.embeddings import LazyEmbedder

            # loaded on the first segment text never embedded before (a resumed or repeated run's
            # texts come from the derived cache): a few seconds once, inside the run
            settings.state.embedder = LazyEmbedder(settings.options.embedder or None, kind="multiverse-tam")

    async def run_item(self, item, ctx, strategy: str, settings: RunSettings) -> None:
        from .strategies import run_item

        await run_item(self, item, ctx, strategy, settings)

    # -- results --------------------------------------------------------------------------------

    def rejudge(self, records, manifest, judge):
        """The judge (not the segmenter) again on the replies it read: stage judge@N."""
        from .strategies import rejudge_plan

        return rejudge_plan(self, records, manifest, judge)

    def model_extraction_candidates(self, records):
        from ...scoring.model_extract import rule_none

        return rule_none(records)     # canon and dilemma answers the rules read as none

    def metrics(self, records, manifest) -> dict[str, Any]:
        from .metrics import compute, dialogue

        if DIALOGUE not in manifest.strategies:
            return compute(records, manifest, self.clusters)
        single = manifest.model_copy(update={"strategies": [s for s in manifest.strategies if s != DIALOGUE]})
        out = compute([r for r in records if r.strategy != DIALOGUE], single, self.clusters)
        out["dialogue"] = dialogue(records)
        return out

    def judge_check(self):
        from .judgecheck import spec

        return spec(lambda judge: self.judge_scoring({}, judge))


def _task_set(tasks: str | list[str]) -> set[str]:
    """The `tasks` option ("canon,dilemma" or a YAML list) as a set of names."""
    return {t.strip() for t in (tasks if isinstance(tasks, list) else str(tasks).split(","))}
