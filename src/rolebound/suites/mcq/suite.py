"""A generic multiple-choice suite: any JSONL of questions, one Jinja2 prompt template.

    rolebound run mcq --data items.jsonl [--set template_file=prompt.j2] [--set chat=false]

Item lines: {"id", "question", "options": [...], "answer": "B" | 1 | "option text", ...any
fields the template uses}. The answer may be a letter, a 0-based index or the option's text.
Log-likelihood scoring compares the options' letters after the prompt; generation parses the
first standalone letter (lm-eval's `first_letter` filter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, StrictUndefined, TemplateError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...errors import InputError
from ...io import file_sha256, read_jsonl
from ...metrics.stats import rate_ci
from ...records import Message
from ...report.builder import Report, run_facts
from ...constants import INVALID, LETTERS
from ...scoring.parsers import parse_first_letter
from .. import register_suite
from ..base import Dataset, RunSettings, Suite
from .options import MCQOptions

DEFAULT_TEMPLATE = (
    "{% if name %}You are {{ name }}{% if source %} from {{ source }}{% endif %}. "
    "Answer the question as this character.\n{% endif %}"
    "Question: {{ question }}\n"
    "{% for o in options %}{{ letters[loop.index0] }}. {{ o }}\n{% endfor %}Answer:")


class MCQItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    question: str
    options: list[str] = Field(min_length=2, max_length=26)
    answer: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_str(cls, v):
        return str(v)

    @model_validator(mode="before")
    @classmethod
    def _answer_letter(cls, data: Any):
        if not isinstance(data, dict) or "options" not in data or "answer" not in data:
            return data
        ans, opts = data["answer"], data["options"]
        if isinstance(ans, bool):
            raise ValueError("answer must be a letter, an index or an option's text")
        if isinstance(ans, int):
            if not 0 <= ans < len(opts):
                raise ValueError(f"answer index {ans} is outside the {len(opts)} options")
            data = {**data, "answer": LETTERS[ans]}
        elif isinstance(ans, str) and len(ans.strip()) == 1 and ans.strip().upper() in LETTERS[: len(opts)]:
            data = {**data, "answer": ans.strip().upper()}
        elif isinstance(ans, str) and ans in opts:
            data = {**data, "answer": LETTERS[opts.index(ans)]}
        else:
            raise ValueError(f"answer {ans!r} is not a letter A-{LETTERS[len(opts) - 1]}, an index or an option")
        return data


@register_suite("mcq")
class MCQSuite(Suite):
    name = "mcq"
    description = "generic multiple-choice questions from a JSONL file"
    strategies = {"direct": "the template, answered directly"}
    default_strategies = ["direct"]
    offers_scoring = True
    options_model = MCQOptions

    def __init__(self):
        # the text prompt_templates() hashes into the manifest (it takes no settings); the
        # compiled template a run renders is in settings.state
        self._template_src = DEFAULT_TEMPLATE

    def _setup(self, settings: RunSettings):
        if "template" in settings.state:
            return settings.state["template"]
        opts = self.opts(settings)
        src = DEFAULT_TEMPLATE
        if opts.template_file:
            p = Path(opts.template_file)
            if not p.exists():
                raise InputError("template file not found", file=str(p), field="template_file")
            src = p.read_text(encoding="utf-8")
        elif opts.template:
            src = str(opts.template)
        try:
            template = Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(src)
        except TemplateError as exc:
            raise InputError(f"bad template: {exc}", field="template") from None
        self._template_src = src
        settings.state["template"] = template
        return template

    def prompt_templates(self) -> dict[str, str]:
        return {"mcq": self._template_src}

    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        if not data:
            raise InputError("the mcq suite needs --data FILE.jsonl", field="data")
        template = self._setup(settings)
        items = read_jsonl(data, MCQItem)
        seen = set()
        for i, it in enumerate(items):
            if it.id in seen:
                raise InputError(f"duplicate id '{it.id}'", file=data, field="id")
            seen.add(it.id)
            try:
                self.render(it, template)
            except TemplateError as exc:
                raise InputError(f"template cannot render item '{it.id}': {exc}", file=data) from None
        return Dataset(items=items, source=str(data), hash=file_sha256(data)[:16])

    @staticmethod
    def render(item: MCQItem, template) -> str:
        fields = {**item.model_dump(), "letters": LETTERS}
        fields.setdefault("name", None)
        fields.setdefault("source", None)
        return template.render(**fields)

    async def run_item(self, item: MCQItem, ctx, strategy: str, settings: RunSettings) -> None:
        opts = self.opts(settings)
        text = self.render(item, self._setup(settings))
        letters = LETTERS[: len(item.options)]
        chat = opts.chat
        meta = {"group": getattr(item, opts.group, None)} if opts.group else {}
        meta.update(mc="answer", labels=list(letters))     # for rolebound.metrics.position
        if settings.scoring == "logprob":
            # Raw text: " A" after "Answer:" (lm-eval's target delimiter); chat: the assistant
            # turn opens with the letter.
            conts = [("" if chat else " ") + L for L in letters]
            kw = {"messages": [Message(role="user", content=text)]} if chat else {"prompt": text}
            await ctx.score("answer", conts, parse=lambda r: r.strip(), gold=item.answer, meta=meta, **kw)
        else:
            max_tokens = opts.max_tokens
            stop = ["\n"] if opts.stop_newline else None
            parse = lambda r: parse_first_letter(r, letters)  # noqa: E731
            if chat:
                await ctx.chat("answer", [Message(role="user", content=text)], parse=parse, gold=item.answer,
                               max_tokens=max_tokens, stop=stop, meta=meta)
            else:
                await ctx.complete("answer", text, parse=parse, gold=item.answer, max_tokens=max_tokens,
                                   stop=stop, meta=meta)

    def metrics(self, records, manifest) -> dict[str, Any]:
        out: dict[str, Any] = {"by_strategy": {}}
        for strat in manifest.strategies:
            recs = [r for r in records if r.strategy == strat and r.stage == "answer" and r.error is None]
            res = rate_ci([bool(r.correct) for r in recs])
            res["invalid"] = sum(1 for r in recs if r.parsed == INVALID)
            groups: dict[str, list[bool]] = {}
            for r in recs:
                if r.meta.get("group") is not None:
                    groups.setdefault(str(r.meta["group"]), []).append(bool(r.correct))
            res["by_group"] = {g: rate_ci(v) for g, v in sorted(groups.items())}
            out["by_strategy"][strat] = res
        out["failed_calls"] = sum(1 for r in records if r.error)
        return out

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        rep = Report(f"MCQ run: {manifest.dataset}")
        rep.facts(run_facts(manifest))
        rows = []
        for strat, m in metrics["by_strategy"].items():
            rows.append([strat, m["n"], m["rate"], m["lo"], m["hi"], m["invalid"]])
        rep.table("Accuracy (%, 95% bootstrap CI)", ["strategy", "n", "acc", "CI low", "CI high", "invalid"], rows)
        samples = [{"_call": r.call_id, "id": r.item_id, "strategy": r.strategy, "gold": r.gold, "parsed": r.parsed,
                    "correct": r.correct, "response": r.response} for r in records if r.stage == "answer"]
        rep.samples("Per-sample answers", ["id", "strategy", "gold", "parsed", "correct", "response"],
                    samples, ["strategy", "correct"])
        return rep.write(run_dir)
