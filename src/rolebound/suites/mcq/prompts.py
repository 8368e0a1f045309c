"""The mcq suite's prompt: one Jinja2 template (the default, `--set template=...` or a file)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, StrictUndefined, TemplateError

from ...constants import LETTERS
from ...errors import InputError

DEFAULT_TEMPLATE = (
    "{% if name %}You are {{ name }}{% if source %} from {{ source }}{% endif %}. "
    "Answer the question as this character.\n{% endif %}"
    "Question: {{ question }}\n"
    "{% for o in options %}{{ letters[loop.index0] }}. {{ o }}\n{% endfor %}Answer:")


def template_source(opts) -> str:
    if opts.template_file:
        p = Path(opts.template_file)
        if not p.exists():
            raise InputError("template file not found", file=str(p), field="template_file")
        return p.read_text(encoding="utf-8")
    return str(opts.template) if opts.template else DEFAULT_TEMPLATE


def compile_template(src: str):
    try:
        return Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(src)
    except TemplateError as exc:
        raise InputError(f"bad template: {exc}", field="template") from None


def render(item, template) -> str:
    fields = {**item.model_dump(), "letters": LETTERS}
    fields.setdefault("name", None)
    fields.setdefault("source", None)
    return template.render(**fields)
