"""A generic multiple-choice suite: any JSONL of questions, one Jinja2 prompt template.

    rolebound run mcq --data items.jsonl [--set template_file=prompt.j2] [--set chat=false]

Item lines: {"id", "question", "options": [...], "answer": "B" | 1 | "option text", ...any
fields the template uses}. The answer may be a letter, a 0-based index or the option's text.
Log-likelihood scoring compares the options' letters after the prompt; generation parses the
first standalone letter (lm-eval's `first_letter` filter).
"""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateError

from ...errors import InputError
from ...io import file_sha256
from .. import register_suite
from ..base import Dataset, RunSettings, Suite, lazy_hook
from .card import card_figures
from . import strategies
from .data import MCQItem, load_items
from .metrics import compute
from .options import MCQOptions, MCQState
from .prompts import DEFAULT_TEMPLATE, compile_template, render, template_source
from .report import report_sections

__all__ = ["MCQItem", "MCQSuite"]


@register_suite("mcq")
class MCQSuite(Suite):
    name = "mcq"
    description = "generic multiple-choice questions from a JSONL file"
    strategies = {"direct": "the template, answered directly"}
    default_strategies = ["direct"]
    clusters: dict[str, tuple[str, ...]] = {}     # by item (its --repeats share it): the set repeats nothing else
    headline = (("accuracy", "by_strategy.direct", "answer"),)
    offers_scoring = True
    options_model = MCQOptions
    state_class = MCQState

    # Its hooks, from its own modules; build.py and importers.py load only when called.
    report = staticmethod(report_sections)
    card_figures = staticmethod(card_figures)
    build_commands = lazy_hook(".build", "commands")
    importers = lazy_hook(".importers", "IMPORTERS")

    def __init__(self):
        # the text prompt_templates() hashes into the manifest (it takes no settings); the
        # compiled template a run renders is in the run's state (MCQState)
        self._template_src = DEFAULT_TEMPLATE

    def _setup(self, settings: RunSettings):
        if settings.state.template is None:
            src = template_source(settings.options)
            settings.state.template = compile_template(src, settings.options.template_file)
            self._template_src = src
        return settings.state.template

    def prompt_templates(self) -> dict[str, str]:
        return {"mcq": self._template_src}

    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        if not data:
            raise InputError("the mcq suite needs --data FILE.jsonl", field="--data")
        template = self._setup(settings)
        items = load_items(data)
        group = settings.options.group
        if group and not any(group in MCQItem.model_fields or group in (it.model_extra or {}) for it in items):
            known = sorted({*MCQItem.model_fields, *(k for it in items for k in it.model_extra or {})})
            raise InputError(f"no item has a field '{group}' to group by; the items' fields: {', '.join(known)}",
                             file=data, field="group")
        for it in items:
            try:
                render(it, template)
            except TemplateError as exc:
                raise InputError(f"template cannot render item '{it.id}': {exc}", file=data) from None
        return Dataset(items=items, source=str(data), hash=file_sha256(data)[:16])

    async def run_item(self, item: MCQItem, ctx, strategy: str, settings: RunSettings) -> None:
        text = render(item, self._setup(settings))
        await strategies.run_item(item, ctx, text, settings.options, settings.scoring)

    def metrics(self, records, manifest) -> dict[str, Any]:
        return compute(records, manifest.strategies, self.clusters)
