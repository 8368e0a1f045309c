"""knowledge-errors: can a role-playing model detect known (KKE) and unknown (UKE) knowledge errors
in questions about its character's memories? (Zhang et al., "Revealing the Challenge of
Detecting Character Knowledge Errors in LLM Role-Playing".)

    rolebound run knowledge-errors --strategy vanilla,s2rd --judge openai:deepseek-chat --repeats 3
    rolebound run knowledge-errors --data roleke.jsonl --set corpus=roleke.corpus.yaml
    rolebound report runs/knowledge-errors__... --judge openai:other-judge   # re-judge only

Options (--set key=value): corpus=FILE, few_shot=FILE, embedder=PATH, rag_k=3, m=3,
chunk_sentences=8, step_max_tokens=192, answer_max_tokens, judge_max_tokens,
hidden_states=true|false|all, judge_scoring=generate|logprob (default: logprob when the judge is
a local engine that can score, as for --scoring in other suites; generate otherwise).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...errors import BackendError
from ...models.base import CHAT
from ...protocol import Protocol
from .. import register_suite
from ..base import Dataset, HubInfo, RunSettings, Suite, lazy_hook, validate_options
from .card import card_figures
from .report import compare_tables, summary_lines, report_sections
from .strategies import STRATEGIES
from .data import KEItem, load_dataset, select_items, stats_tables
from .importers import roleke_or_none
from .options import KnowledgeErrorsOptions, KnowledgeErrorsState
from .prompts import all_templates
from .strategies import USES_RETRIEVAL, Methods, judge_scoring_mode


@register_suite("knowledge-errors")
class KnowledgeErrorsSuite(Suite):
    description = "known/unknown character knowledge errors over four memory types; judge-scored (KKE/UKE)"
    default_strategies = ["vanilla"]
    # the KKE and UKE item of a memory share it (and --repeats an item): answers cluster by memory
    clusters = {"answer": ("memory_id",)}
    headline = (("detection, vanilla (all answers)", "accuracy.vanilla.overall", "answer"),
                ("KKE detection, vanilla", "accuracy.vanilla.KKE.all", "answer"),
                ("UKE detection, vanilla", "accuracy.vanilla.UKE.all", "answer"))
    options_model = KnowledgeErrorsOptions
    state_class = KnowledgeErrorsState
    card_limit = 24
    # the starter (public-domain characters, corpora and errors we wrote) goes under the package's
    # licence; an export of other data (a RoleKE-Bench import) states none unless --license says so
    hub = HubInfo(config_field="error_type", configs={"KKE": "kke", "UKE": "uke"},
                  pretty_name="Character knowledge errors (rolebound starter)",
                  citation="@misc{zhang_knowledge_errors,\n  title = {Revealing the Challenge of Detecting Character "
                           "Knowledge Errors in LLM Role-Playing},\n  author = {Zhang, Wenyuan and Sheng, Jiawei and Nie, "
                           "Shuaiyi and others}\n}", license="apache-2.0")
    # Section 6.1: a separate evaluator (DeepSeek-v2, not GPT-4o, to avoid self-bias; Appendix C) writes
    # an explanation and yes/no (Tables 14-15); accuracy is mean +- SEM over three evaluations
    # (Tables 2-3). The paper states no decoding parameters, so ours stay (greedy, 256 tokens).
    protocol = Protocol(source="Zhang et al. Section 6.1, Tables 14-15, Appendix C",
                        judge_required=True, judge_separate=True,
                        notes="no decoding parameters in the paper; three evaluations (--repeats 3) "
                              "need --temperature above 0")
    repeats_native = True           # its tables already give mean +- SEM over repeats

    # Its hooks, from its own modules; build.py and importers.py load only when called.
    strategies = STRATEGIES
    report = staticmethod(report_sections)
    summary = staticmethod(summary_lines)
    compare = staticmethod(compare_tables)
    card_figures = staticmethod(card_figures)
    build_commands = lazy_hook(".build", "commands")
    pairs = lazy_hook(".pairs", "make_pairs")              # `rolebound data pairs` (pairs.py)
    importers = lazy_hook(".importers", "IMPORTERS")

    # -- data -------------------------------------------------------------------------------
    def prompt_templates(self) -> dict[str, str]:
        return all_templates()

    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        opts = settings.options   # validated against KnowledgeErrorsOptions
        ds = load_dataset(data, opts, foreign=roleke_or_none)
        # this run's methods (retriever, case pool, caps), for run_item() and after_items()
        settings.state.methods = Methods.for_run(ds, opts)
        return ds

    def select(self, items: Sequence[KEItem], limit: int | None,
               settings: RunSettings | None = None) -> list[KEItem]:
        """Whole KKE/UKE pairs, taken round-robin over characters and, inside a character, over
        memory categories, so a small --limit still spans characters and categories."""
        return select_items(items, limit)

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        return stats_tables(dataset)

    # -- work -------------------------------------------------------------------------------
    def option_departures(self, options: dict[str, Any]) -> list[str]:
        return (["judge_scoring=logprob: the judge's verdict read from log-likelihoods, not generated"]
                if options.get("judge_scoring") == "logprob" else [])

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        backend.require(CHAT, "the methods generate free-text answers")
        if judge is not None:
            # the resolved mode goes into the options, hence into the manifest and the resume key
            settings.resolve("judge_scoring", judge_scoring_mode(settings.options.judge_scoring, judge))
        if USES_RETRIEVAL & set(settings.strategies) and not settings.options.embedder:
            try:
                from ...scoring.embeddings import default_path

                default_path()
            except BackendError as exc:
                raise BackendError(f"{exc} (RAG and S2RD retrieve with it), or --set embedder=PATH") from None

    async def run_item(self, item: KEItem, ctx, strategy: str, settings: RunSettings) -> None:
        methods = settings.state.methods
        if methods is None:
            raise RuntimeError("load() must run before run_item()")
        ctx.meta = {"character": item.character, "category": item.memory_category,
                    "error_type": item.error_type, "memory_id": item.memory_id}
        ans = await methods.answer(item, ctx, strategy)
        await methods.judge(ctx, character=item.character, error_type=item.error_type,
                                 correct_memory=item.correct_memory, query=item.query,
                                 response=ans.response or "")

    async def after_items(self, session, dataset: Dataset, settings: RunSettings) -> None:
        from .hidden import after_run

        await after_run(session, dataset, settings, settings.options.hidden_states,
                        lambda items, limit: self.select(items, limit, settings))

    # -- results ----------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        from .metrics import compute

        return compute(records, list(manifest.strategies), clusters=self.clusters)

    def judge_check(self):
        from .judgecheck import spec

        return spec(lambda judge: judge_scoring_mode(None, judge))

    # -- re-judging -------------------------------------------------------------------------
    def rejudge(self, records, manifest, judge):
        """Every final answer judged again (stage judge@N); the answers are never touched."""
        from .strategies import rejudge_plan

        opts = validate_options(self, manifest.options or {})
        return rejudge_plan(records, manifest, judge, opts.judge_max_tokens)
