"""CHARM: Boundary-Awareness vs Boundary-Compliance for temporal and cross-universe boundaries.

Strategies
- independent (the paper's protocol, Section 3.1): BA, BC and KV questions each in a fresh
  conversation.
- sequential (Appendix M, Table 15): for each BC question, the paired BA question first, then the
  BC question in the same conversation.
- no-role (Appendix N, Table 16): the Cross-Universe BC questions with no role at all.

Scoring
- generate (the paper's mode): Table 19/20 prompts; replies read by scoring.choice (in-character
  Yes/No, the last committed option by number or text), or with extraction=strict by the paper's
  leading Yes/No and last `Answer: <n>`.
- logprob: same prompts; BA compares "Yes" vs "No" as the reply's first token, MCQs compare the
  digits after an assistant turn prefilled with "Answer: " (the reasoning step is skipped).
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from ...protocol import Protocol
from .. import register_suite
from ..base import DIALOGUE, Dataset, HubInfo, RunSettings, Suite, lazy_hook
from .card import card_figures
from .report import compare_tables, summary_lines, report_sections
from .strategies import STRATEGIES, extractor_for, run_item
from . import strategies
from .data import data_hash, dialogue_probes, expand, load_data, select, stats_tables
from .options import CharmOptions, CharmState
from .prompts import TEMPLATES


@register_suite("charm")
class CharmSuite(Suite):
    description = "temporal and cross-universe knowledge boundaries: awareness vs compliance (CHARM)"
    default_strategies = ["independent"]
    offers_scoring = True
    options_model = CharmOptions
    state_class = CharmState
    card_limit = 600
    # the CHARM release states no licence (and the starter's profiles are its Table 5): local use only
    hub = HubInfo(config_field="stage", pretty_name="CHARM (rolebound build)",
                  citation="@misc{han_charm,\n  title = {CHARM: Character Hallucination for Multicultural Role Play "
                           "Benchmark},\n  author = {Han, Sunkyung and Park, Nahyeon and Seo, Gaeun and Yoon, Seunghyun "
                           "and Bak, JinYeong}\n}",
                  source_datasets=("CHARM release (no licence stated)",),
                  task_categories=("question-answering", "multiple-choice"))
    # Appendix H: every model at temperature 0.0, top_p 0.95, max_completion_tokens 256, answers
    # generated ("First, briefly explain your reasoning ... Answer: <number>", Table 20).
    protocol = Protocol(source="CHARM Appendix H", scoring="generate",
                        decoding={"temperature": 0.0, "top_p": 0.95, "max_tokens": 256})
    # The unit the design repeats (issue 51): a KV fact is asked of every historical character of
    # its region (the release: 184 prompts x 4), a temporal concept of 20 characters, a cross BC
    # fact of 4; an instance shares its BA answer with every fact of its (role, target), so
    # instances cluster by target; no-role by the role character. The BA Yes control asks each
    # question of one role only, so its unit is the item (its repeats). The two boundary types are
    # strata (fixed shares of the design, resampled apart). stats.cluster_key reads these.
    clusters = {"strata": ("boundary",), "kv": ("fact",), "kv~ctl": ("fact",), "ba": ("target",),
                "seq.ba": ("target",), "bc": ("fact", "target"), "seq.bc": ("fact", "target"), "nr": ("role",),
                "instance": ("target",)}
    headline = (("BA accuracy", "stage_accuracy.ba/all", "ba"), ("BC accuracy", "stage_accuracy.bc/all", "bc"),
                ("KV accuracy", "stage_accuracy.kv/all", "kv"), ("Compliance Gap", "matrix.all.compliance_gap",
                                                                  "instance"),
                ("Recognition Failure", "matrix.all.recognition_failure", "instance"),
                ("verified override", "override", "instance"), ("no-role accuracy", "no_role.nr_all", "nr"))

    # Its hooks, from its own modules; build.py and importers.py load only when called.
    strategies = STRATEGIES
    run_item = staticmethod(run_item)         # the strategy: one item's calls (strategies.py)
    extractor_for = staticmethod(extractor_for)
    report = staticmethod(report_sections)
    summary = staticmethod(summary_lines)
    compare = staticmethod(compare_tables)
    card_figures = staticmethod(card_figures)
    build_commands = lazy_hook(".build", "commands")
    pairs = lazy_hook(".pairs", "make_pairs")              # `rolebound data pairs` (pairs.py)
    importers = lazy_hook(".importers", "IMPORTERS")

    # -- data -------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        opts = settings.options
        files = [f.strip() for f in str(data).split(",") if f.strip()] if data else []
        builtin = opts.builtin
        if files:       # release.py: only a --data file can be an imported release
            from . import release

            if any(release.is_release_file(f) for f in files):
                return self._load_release(files, settings)
        if not builtin and not files:
            raise InputError("builtin=false needs --data FILE", field="--set builtin")
        d, sources = load_data(files, builtin=builtin)
        if not d.concepts and not d.facts:
            raise InputError("no concepts or facts to ask about", file=sources[-1] if sources else None)
        seed = opts.data_seed
        items, info = expand(d, seed=seed)
        settings.state.items = items        # the dialogue's `items` warm-up reads the role's others
        src = "builtin:charm" + ("+" + ",".join(files) if files else "") if builtin else ",".join(files)
        return Dataset(items=items, source=src, hash=data_hash(d, seed), extra={"data": d, **info})

    def _load_release(self, files: list[str], settings: RunSettings) -> Dataset:
        """An imported release (release.py) holds every question, built: asked as it is, alone."""
        if len(files) > 1:
            raise InputError("an imported release is the whole dataset; give it as the only --data file",
                             file=files[0], field="--data")
        if "builtin" in settings.options.given() and settings.options.builtin:
            raise InputError("an imported release is the whole dataset; builtin=true would add the starter set",
                             field="--set builtin")
        from . import release

        header, items = release.load_release(files[0])
        settings.state.items = items
        return Dataset(items=items, source=files[0], hash=release.release_hash(header, items),
                       extra={"release": header}, provenance=header.provenance.model_dump())

    def select(self, items, limit, settings=None):
        """Keep whole instances: BC questions taken round-robin over (region, boundary), plus the
        BA and KV questions they pair with, until about `limit` questions. A dialogue-only run
        asks BA and BC only, so --limit counts those probes (never the warm-up turns)."""
        chosen = select(dialogue_probes(items) if settings is not None and settings.strategies == [DIALOGUE]
                        else items, limit)
        if settings is not None and settings.options.characters:
            chosen = only_characters(chosen, items, settings.options.characters)
        if settings is not None and DIALOGUE in settings.strategies and settings.state.dialogue_backend is not None:
            from ...dialogue import budget

            extraction = settings.options.extraction
            budget.check_context(settings.state.dialogue_backend,
                                 [p for i in chosen for p in strategies.dialogue_probes(i, settings, extraction)],
                                 settings.options)
        return chosen

    def stats(self, dataset: Dataset):
        from . import release

        return release.stats_tables(dataset) if "release" in dataset.extra else stats_tables(dataset)

    def prompt_templates(self) -> dict[str, str]:
        return dict(TEMPLATES)

    # -- run --------------------------------------------------------------------------------
    def check(self, backend, settings: RunSettings, judge=None) -> None:
        if DIALOGUE in settings.strategies:
            from ...dialogue import budget

            budget.setup(settings, backend)

    async def before_items(self, session, dataset: Dataset, items, settings: RunSettings) -> None:
        """Distractor-to-answer similarity per MCQ (Table 14), stored in each record's meta; the
        simulated user's backend, for a dialogue run."""
        if DIALOGUE in settings.strategies:     # check() kept the simulated user, if any
            from ...dialogue import budget

            budget.attach(session, settings)
        if settings.strategies != [DIALOGUE]:       # the dialogue's records do not use it
            await strategies.before_items(items, settings, settings.options)

    async def after_items(self, session, dataset: Dataset, settings: RunSettings) -> None:
        """The override control (--set kv_control, default on): candidates' KV questions again
        with the factual option moved (strategies.override_control); the BA Yes control (--set
        ba_control, default on): in-boundary awareness questions whose answer is Yes
        (strategies.yes_control)."""
        if settings.options.kv_control and "independent" in settings.strategies:
            await strategies.override_control(session, dataset, settings, settings.options)
        if settings.options.ba_control and "independent" in settings.strategies:
            await strategies.yes_control(session, dataset, settings, settings.options)

    # -- results ----------------------------------------------------------------------------

    def model_extraction_candidates(self, records):
        from ...scoring.model_extract import rule_none

        return rule_none(records)     # BA Yes/No and BC/KV options the rules read as none

    def metrics(self, records, manifest) -> dict[str, Any]:
        from .metrics import compute

        out = compute(records, self.clusters)
        out["scoring"] = manifest.scoring
        if DIALOGUE in manifest.strategies:
            from .metrics import dialogue

            out["dialogue"] = dialogue(records)
        return out


def only_characters(chosen: list, items: list, names: str) -> list:
    """--set characters=A,B: the chosen questions asked as one of them (BA and BC as the role, KV
    as the target it plays), e.g. a pairs folder's held-out characters. A name no question is
    asked as is an error, not an empty run."""
    want = [x.strip() for x in names.split(",") if x.strip()]
    known = {i.role for i in items}
    unknown = [x for x in want if x not in known]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        raise InputError(f"no question is asked as '{unknown[0]}'" + (f" (did you mean '{close[0]}'?)" if close else ""),
                         field="characters")
    return [i for i in chosen if i.role in set(want)]

