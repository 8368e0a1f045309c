"""Jinja templates that come from outside the package (`--set template=...`, a template file, a
model's chat template) render here: in Jinja's immutable sandbox (no attribute starting with _, no
mutation of lists and dicts), with bounds on what one render may build and do. A template that
breaks a bound raises TemplateLimit, a TemplateError, so callers report it as a bad template.

    template = compile_template(source)       # a TemplateError for bad syntax or a bound
    text = template.render(question=...)      # a TemplateError for a runaway render
"""

from __future__ import annotations

import functools
import re
import string
import threading
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.environment import Template
from jinja2.exceptions import SecurityError, TemplateError, TemplateRuntimeError
from jinja2.runtime import str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_CHARS = 4_000_000       # the longest text (or list) one render may build, and its output
MAX_STEPS = 100_000         # calls and loop turns in one render (a second or so)
MAX_INT_BITS = 100_000      # 10**30000 is far past any prompt's need

_state = threading.local()


class TemplateLimit(SecurityError):
    """A template went past a bound (size, steps, recursion)."""


def _size(x: Any) -> int:
    """Characters of a string; items plus the strings inside a container (stops counting past
    MAX_CHARS, so a list nested into itself by reference costs nothing to measure)."""
    total, todo = 0, [x]
    while todo and total <= MAX_CHARS:
        x = todo.pop()
        if isinstance(x, (str, bytes)):
            total += len(x)
        elif isinstance(x, (list, tuple, set, frozenset, dict)):
            total += len(x)
            if total <= MAX_CHARS:
                todo.extend(x.items() if isinstance(x, dict) else x)
        else:
            total += 1
    return total


def _bound(n: int, what: str = "text") -> None:
    if n > MAX_CHARS:
        raise TemplateLimit(f"the template builds {what} over {MAX_CHARS:,} characters")


def _step(n: int = 1) -> None:
    _state.steps = getattr(_state, "steps", 0) + n
    if _state.steps > MAX_STEPS:
        raise TemplateLimit(f"the template takes over {MAX_STEPS:,} steps (calls and loop turns)")


WIDTHS = {"center", "ljust", "rjust", "zfill", "expandtabs", "indent", "batch", "slice", "wordwrap", "truncate"}


def _check_ints(args, kwargs) -> None:
    """The width or count a call pads or fills to (refused past MAX_CHARS)."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_CHARS:
            raise TemplateLimit(f"the template passes {v} to a call; the bound is {MAX_CHARS:,}")


def _check_args(name: str, args, kwargs) -> None:
    if name in WIDTHS:
        _check_ints(args, kwargs)
    _bound(sum(_size(v) for v in (*args, *kwargs.values())))


def _check_printf(fmt: str) -> None:
    for width in re.findall(r"%[-#0 +]*(\d+)|%[-#0 +]*(?:\d+|\*)?\.(\d+)", fmt):
        for w in width:
            if w and int(w) > MAX_CHARS:
                raise TemplateLimit(f"the template formats a field {w} wide; the bound is {MAX_CHARS:,}")


def _check_format(fmt: str) -> None:
    try:
        specs = [spec for _, _, spec, _ in string.Formatter().parse(fmt) if spec]
    except ValueError:
        return                  # str.format says what is wrong with it
    for spec in specs:
        for w in re.findall(r"\d+", spec):
            if int(w) > MAX_CHARS:
                raise TemplateLimit(f"the template formats a field {w} wide; the bound is {MAX_CHARS:,}")


def _grown(name: str, value: Any, args: tuple) -> int:
    """An upper bound on what replace/join/indent/expandtabs make of `value` (each can multiply it)."""
    if not isinstance(value, str) and name != "join":
        return 0
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        hits = value.count(old) if old else len(value) + 1
        return len(value) + hits * len(new)
    if name == "join":
        seq, sep = (value, args[0] if args else "") if not isinstance(value, str) else (args[0] if args else (), value)
        return _size(seq) + (len(seq) if hasattr(seq, "__len__") else 0) * _size(sep)
    if name in ("indent", "expandtabs"):
        width = args[0] if args else 4 if name == "indent" else 8
        width = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        return len(value) + (value.count("\n" if name == "indent" else "\t") + 1) * width
    return 0


def _bounded_filter(name: str, func):
    @functools.wraps(func)          # keeps jinja_pass_arg (pass_context etc.)
    def run(*args, **kwargs):
        _step()
        plain = args[1:] if getattr(func, "jinja_pass_arg", None) else args   # the value first, no context
        _check_args(name, plain, kwargs)
        if plain:
            _bound(_grown(name, plain[0], tuple(plain[1:])))
            if name == "format" and isinstance(plain[0], str):
                _check_printf(plain[0])
        out = func(*args, **kwargs)
        if isinstance(out, (str, list, tuple)):
            _bound(_size(out))
        return out
    return run


def _loop_turns(seq):
    """Charges a for loop's turns before it starts (an iterator as it goes)."""
    if hasattr(seq, "__len__"):
        _step(len(seq))
        return seq
    return _counted(seq)


def _counted(seq):
    for x in seq:
        _step()
        yield x


class _Generator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame) -> None:     # `a ~ b`: measured first
        self.write("environment.concat_bounded((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedTemplate(Template):
    def render(self, *args: Any, **kwargs: Any) -> str:
        _state.steps = 0
        out, n = [], 0
        try:
            for chunk in self.generate(*args, **kwargs):
                n += len(chunk)
                _bound(n, "output")
                out.append(chunk)
        except RecursionError:
            raise TemplateLimit("the template recurses too deep (a macro that calls itself?)") from None
        except MemoryError:
            raise TemplateLimit("the template ran out of memory") from None
        except TemplateError:
            raise
        except Exception as exc:    # 1 + "a", a division by zero: the template's fault too
            raise TemplateRuntimeError(f"{type(exc).__name__}: {exc}") from None
        return "".join(out)


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    code_generator_class = _Generator
    template_class = BoundedTemplate
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any):
        super().__init__(finalize=self._finalized, **kwargs)
        self.globals.pop("lipsum", None)     # lipsum(n) makes n paragraphs
        self.filters = {k: _bounded_filter(k, f) for k, f in self.filters.items()}
        self.filters["_rb_loop_turns"] = _loop_turns

    def _parse(self, source, name, filename):
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "_rb_loop_turns", [], [], None, None, lineno=loop.lineno)
        return tree

    @staticmethod
    def _finalized(value: Any) -> Any:     # every {{ }} value, before it becomes text
        _bound(_size(value), "output")
        return value

    @staticmethod
    def concat_bounded(parts: tuple) -> str:
        _bound(sum(_size(p) for p in parts))
        return str_join(parts)

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        _step()
        ints = isinstance(left, int) and isinstance(right, int)
        if operator == "*":
            if ints:
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise TemplateLimit("the template builds a number too large")
            else:
                for seq, n in ((left, right), (right, left)):
                    if isinstance(n, int) and isinstance(seq, (str, list, tuple)):
                        _bound(_size(seq) * max(n, 0))
        elif operator == "**" and ints and abs(left) > 1 and right > 0:
            if left.bit_length() * right > MAX_INT_BITS:
                raise TemplateLimit("the template builds a number too large")
        elif operator == "+" and not ints:
            _bound(_size(left) + _size(right))
        elif operator == "%" and isinstance(left, str):
            _check_printf(left)
            _bound(len(left) + _size(right))
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's names
        _step()
        owner, name = getattr(__obj, "__self__", None), getattr(__obj, "__name__", "")
        _check_args(name if isinstance(owner, str) else "", args, kwargs)
        if isinstance(owner, (str, list, tuple, dict)):
            _bound(_size(owner) + _grown(name, owner, args))
        out = super().call(__context, __obj, *args, **kwargs)
        if isinstance(out, (str, list, tuple)):
            _bound(_size(out))
        return out

    def wrap_str_format(self, value: Any):
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        fmt = value.__self__

        @functools.wraps(wrapper)
        def checked(*args: Any, **kwargs: Any) -> str:
            _check_format(fmt)
            return wrapper(*args, **kwargs)
        return checked


def compile_template(source: str, env: BoundedEnvironment | None = None, **options: Any) -> BoundedTemplate:
    """The template (env: one made with extra filters or globals); a TemplateError if it cannot be."""
    env = env or BoundedEnvironment(**options)
    try:
        return env.from_string(source)
    except RecursionError:
        raise TemplateLimit("the template is nested too deep") from None
