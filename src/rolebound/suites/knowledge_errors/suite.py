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

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from ...errors import BackendError, CapabilityError, InputError
from ...io import file_sha256, stable_hash
from . import metrics as M
from ...models.base import CHAT, CHAT_TEMPLATE, HIDDEN, LOGPROB
from ...records import Message
from ...report.builder import Report
from ...report.fmt import fmt_mean_sem
from . import prompts as P
from .strategies import STRATEGIES, USES_RETRIEVAL, Methods
from .retrieval import Retriever
from . import data as D
from .. import register_suite
from ..base import Dataset, RunSettings, Suite, default_scoring_for, interleave, validate_options
from ...protocol import Protocol
from .importers import roleke_items
from .options import KnowledgeErrorsOptions
from .report import HIDDEN_FILE, RETRIEVAL_FILE

JUDGE_SCORING = ("generate", "logprob")


def judge_scoring_mode(v: str | None, judge) -> str:
    """The judge's scoring mode: `judge_scoring` (v) if set, else the default rule of `--scoring`
    (logprob on the demo models, generate on every other model)."""
    if v is None or str(v).strip() == "":
        mode = default_scoring_for(judge)
    else:
        mode = str(v).strip().lower()
        if mode not in JUDGE_SCORING:
            raise InputError(f"must be generate or logprob, not {v!r}", field="judge_scoring")
    if mode == "logprob" and not judge.supports(LOGPROB):
        raise CapabilityError(f"judge_scoring=logprob needs a judge that scores log-likelihoods, and backend "
                              f"'{judge.spec}' cannot; use --set judge_scoring=generate or another --judge")
    if mode == "generate":
        judge.require(CHAT, "judge_scoring=generate: the judge writes an explanation and a judgment")
    return mode


def _hidden_mode(value) -> str:
    v = str(value).lower()
    if v in ("1", "true", "yes", "on"):
        return "run"
    if v in ("0", "false", "no", "off"):
        return "off"
    if v == "all":
        return "all"
    raise InputError("must be true, false or all", field="hidden_states")


@register_suite("knowledge-errors")
class KnowledgeErrorsSuite(Suite):
    name = "knowledge-errors"
    description = "known/unknown character knowledge errors over four memory types; judge-scored (KKE/UKE)"
    strategies = STRATEGIES
    default_strategies = ["vanilla"]
    uses_judge = True
    options_model = KnowledgeErrorsOptions
    card_limit = 24  # `rolebound card`: --limit of its quick, balanced subset (docs/card.md)
    # Section 6.1: a separate evaluator (DeepSeek-v2, not GPT-4o, to avoid self-bias; Appendix C) writes
    # an explanation and yes/no (Tables 14-15); accuracy is mean +- SEM over three evaluations
    # (Tables 2-3). The paper states no decoding parameters, so ours stay (greedy, 256 tokens).
    protocol = Protocol(source="Zhang et al. Section 6.1, Tables 14-15, Appendix C",
                        judge_required=True, judge_separate=True,
                        notes="no decoding parameters in the paper; three evaluations (--repeats 3) "
                              "need --temperature above 0")
    repeats_native = True           # its tables already give mean +- SEM over repeats

    # -- data -------------------------------------------------------------------------------
    def prompt_templates(self) -> dict[str, str]:
        return P.all_templates()

    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        opts = self.opts(settings)   # validated against KnowledgeErrorsOptions
        target = opts.chunk_sentences
        if data:
            items_path = Path(data)
            source = str(items_path)
        else:
            items_path = D.starter_dir() / D.STARTER_ITEMS
            source = "builtin:knowledge-errors/starter"
        items = D.load_items(items_path, roleke_items(items_path) if D.looks_like_roleke(items_path) else None)
        corpus_path = Path(opts.corpus) if opts.corpus else D.sibling_corpus(items_path)
        if corpus_path is not None and not corpus_path.exists():
            raise InputError("corpus file not found", file=str(corpus_path), field="corpus")
        corpora = D.corpora_chunks(D.load_corpus(corpus_path), target) if corpus_path else {}
        from_items = D.chunks_from_items(items)
        fallback = sorted(c for c in from_items if not corpora.get(c))
        for c in fallback:
            corpora[c] = from_items[c]
        pool_path = Path(opts.few_shot) if opts.few_shot else D.starter_dir() / "few_shot.yaml"
        pool = D.load_cases(pool_path)
        digest = stable_hash([file_sha256(items_path), file_sha256(corpus_path) if corpus_path else None,
                              file_sha256(pool_path), target])
        ds = Dataset(items=items, source=source, hash=digest, extra={
            "corpora": corpora, "corpus_file": str(corpus_path) if corpus_path else None,
            "corpus_from_items": fallback, "few_shot_file": str(pool_path), "pool": pool})
        # this run's methods (retriever, case pool, caps), for run_item() and after_items()
        settings.state["methods"] = Methods(
            retriever=Retriever(corpora, opts.embedder), pool=pool, rag_k=opts.rag_k, m=opts.m,
            step_tokens=opts.step_max_tokens, answer_tokens=opts.answer_max_tokens,
            judge_tokens=opts.judge_max_tokens, judge_scoring=opts.judge_scoring or "generate")
        return ds

    def select(self, items: Sequence[D.KEItem], limit: int | None, settings: RunSettings | None = None) -> list[D.KEItem]:
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

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        import pandas as pd

        items = dataset.items
        rows = []
        for ch in sorted({i.character for i in items}) + ["all"]:
            for et in D.ERROR_TYPES:
                its = [i for i in items if (ch == "all" or i.character == ch) and i.error_type == et]
                cnt = Counter(i.memory_category for i in its)
                rows.append({"character": ch, "error": et, **{D.CATEGORY_SHORT[c]: cnt.get(c, 0) for c in D.CATEGORIES},
                             "total": len(its)})
        counts = pd.DataFrame(rows)

        def cell(its):
            if not its:
                return "0"
            words = sum(len(i.query.split()) for i in its) / len(its)
            return f"{len(its)}/{words:.1f}"

        t1 = {}
        for c in list(D.CATEGORIES) + ["total"]:
            its = [i for i in items if c == "total" or i.memory_category == c]
            t1[D.CATEGORY_LABEL.get(c, "Total")] = {et: cell([i for i in its if i.error_type == et])
                                                     for et in D.ERROR_TYPES} | {"Total": cell(its)}
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

    # -- work -------------------------------------------------------------------------------
    def check(self, backend, settings: RunSettings, judge=None) -> None:
        backend.require(CHAT, "the methods generate free-text answers")
        if judge is not None:
            # the resolved mode goes into the options, hence into the manifest and the resume key
            settings.resolve("judge_scoring", judge_scoring_mode(self.opts(settings).judge_scoring, judge))
        if USES_RETRIEVAL & set(settings.strategies) and not self.opts(settings).embedder:
            try:
                from ...scoring.embeddings import default_path

                default_path()
            except BackendError as exc:
                raise BackendError(f"{exc} (RAG and S2RD retrieve with it), or --set embedder=PATH") from None

    async def run_item(self, item: D.KEItem, ctx, strategy: str, settings: RunSettings) -> None:
        methods = settings.state.get("methods")
        if methods is None:
            raise RuntimeError("load() must run before run_item()")
        ctx.meta = {"character": item.character, "category": item.memory_category,
                    "error_type": item.error_type, "memory_id": item.memory_id}
        ans = await methods.answer(item, ctx, strategy)
        await methods.judge(ctx, character=item.character, error_type=item.error_type,
                                 correct_memory=item.correct_memory, query=item.query,
                                 response=ans.response or "")

    async def after_items(self, session, dataset: Dataset, settings: RunSettings) -> None:
        run_dir = session.run_dir.path
        info = {"corpus_file": dataset.extra.get("corpus_file"),
                "corpus_from_items": dataset.extra.get("corpus_from_items", []),
                "few_shot_file": dataset.extra.get("few_shot_file"),
                "chunks": {c: len(v) for c, v in dataset.extra.get("corpora", {}).items()}}
        if USES_RETRIEVAL & set(settings.strategies) and settings.state.get("methods") is not None:
            info["embedder"] = settings.state["methods"].retriever.name
        (run_dir / RETRIEVAL_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False), encoding="utf-8")
        mode = _hidden_mode(self.opts(settings).hidden_states)
        if mode == "off":
            return
        backend = session.backend
        if not backend.supports(HIDDEN):
            (run_dir / HIDDEN_FILE).unlink(missing_ok=True)
            return
        items = dataset.items if mode == "all" else self.select(dataset.items, settings.limit, settings)
        await save_hidden_states(backend, items, run_dir / HIDDEN_FILE)

    # -- results ----------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        return M.compute(records, list(manifest.strategies))

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        mode = (metrics.get("judge_scoring") or {}).get(str(metrics.get("judge_round")))
        if mode:
            out.append(("judge scoring", mode))
        for strat, acc in metrics.get("accuracy", {}).items():
            j = acc["judgments"]
            out.append((f"{strat}: KKE / UKE / avg",
                        f"{fmt_mean_sem(acc['KKE']['all'], False)} / {fmt_mean_sem(acc['UKE']['all'], False)} / "
                        f"{fmt_mean_sem(acc['overall'], False)} (invalid judgments {j['invalid']}/{j['answers']})"))
        return out

    def card_figures(self, metrics) -> dict[str, Any]:
        from .card import card_figures

        return card_figures(metrics)

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        from .report import build

        return build(metrics, records, manifest, Path(run_dir))

    def compare(self, rep: Report, entries) -> None:
        from .report import method_rows, METHOD_COLUMNS

        rows = []
        for d, m, met in entries:
            for r in method_rows(met):
                rnd = str(met.get("judge_round"))
                judge = (met.get("judges") or {}).get(rnd, "-")
                mode = (met.get("judge_scoring") or {}).get(rnd)
                rows.append([str(d), m.model, f"{judge} ({mode})" if mode else judge] + r)
        rep.table("Methods across runs (Table 3 layout, accuracy %, mean over repeats)",
                  ["run", "model", "judge"] + METHOD_COLUMNS, rows)

    # -- re-judging -------------------------------------------------------------------------
    def rejudge(self, run_dir: Path, judge_spec: str, *, progress: bool = True,
                judge_options: dict | None = None) -> int:
        """Judge every final answer again with another judge; returns the round written.

        The new judgments are stage `judge@N` records appended to records.jsonl (answers are never
        touched); metrics use the latest round. Asking for the judge of the latest round again
        resumes that round (its finished calls cost nothing) instead of opening a new one.
        """
        return asyncio.run(_rejudge(self, Path(run_dir), judge_spec, progress, judge_options))


async def save_hidden_states(backend, items: Sequence[D.KEItem], path: Path) -> None:
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
        for et in D.ERROR_TYPES:
            if et in v:
                rows.append((mid, v, et, v[et].query if use_queries else v[et].false_memory))
    texts = [P.VANILLA.format(role_name=v["character"], given_query=t) for _, v, _, t in rows]
    chat = backend.supports(CHAT_TEMPLATE)
    # keyed before rendering: checking a finished run's file must not load the model
    key = stable_hash([backend.spec, texts, chat])
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as old:
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


async def _rejudge(suite: KnowledgeErrorsSuite, run_dir: Path, judge_spec: str, progress: bool,
                   judge_options: dict | None = None) -> int:
    from ...models import create_backend
    from ...records import Decoding
    from ...rejudge import endpoint_of, judge_answers, log_rejudge, next_round
    from ...runner import ItemContext
    from ...store import RunDir, load_records

    rd = RunDir(run_dir)
    manifest = rd.read_manifest()
    records = load_records(run_dir)
    answers = [r for r in records if r.stage == M.ANSWER_STAGE and r.role == "model" and r.error is None
               and r.meta.get("error_type") in D.ERROR_TYPES]
    if not answers:
        raise InputError("no final answers to judge in this run", file=str(rd.records_path))
    dec = manifest.decoding
    judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed), **(judge_options or {}))
    opts = manifest.options or {}
    # no --set here: the new judge gets the default rule (logprob on the demo models)
    mode = judge_scoring_mode(None, judge)
    modes = M.judge_modes(records)
    if not modes and manifest.judge:
        modes = {0: opts.get("judge_scoring", "generate")}
    round_ = next_round(records, manifest, judge.spec, mode, modes)
    methods = Methods(judge_tokens=validate_options(suite, opts).judge_max_tokens, judge_scoring=mode)

    async def judge_one(session, a):
        ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat,
                          meta={k: a.meta[k] for k in ("character", "category", "error_type", "memory_id")
                                if k in a.meta})
        await methods.judge(ctx, character=a.meta.get("character", ""), error_type=a.meta["error_type"],
                            correct_memory=a.meta.get("correct_memory", ""), query=a.meta.get("query", ""),
                            response=a.response or "", round_=round_, judge_spec=judge.spec)

    failed = await judge_answers(rd, manifest, judge, answers, judge_one, progress=progress)
    log_rejudge(rd, manifest, {"round": round_, "judge": judge.spec, "judge_scoring": mode,
                               "answers": len(answers), "failed": failed, **endpoint_of(judge)})
    return round_
