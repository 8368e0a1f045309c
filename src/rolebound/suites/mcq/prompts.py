"""The mcq suite's prompt: one Jinja2 template (the default, `--set template=...` or a file)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import StrictUndefined, TemplateError

from ...records import LETTERS
from ...errors import InputError
from ...io import check_file
from ...sandbox import compile_template as sandboxed

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
        p = check_file(p)
        try:
            return p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text; save the file as UTF-8", file=str(p), field="template_file") from None
    return str(opts.template) if opts.template else DEFAULT_TEMPLATE


def compile_template(src: str, file: str | None = None):
    """`file`: the template_file it was read from (an error names it), else the --set template text."""
    try:
        return sandboxed(src, undefined=StrictUndefined, keep_trailing_newline=True)
    except TemplateError as exc:
        raise InputError(f"bad template: {exc}", file=file, field=None if file else "--set template") from None


def render(item, template) -> str:
    fields = {**item.model_dump(), "letters": LETTERS}
    fields.setdefault("name", None)
    fields.setdefault("source", None)
    return template.render(**fields)
