"""Checks before any call: the simulated user's model, and whether the deepest dialogue fits the
model's context window.

The context a probe at depth N needs is estimated, not measured: the text of the first N user
turns, the role framing and the probe (counted with the model's own tokenizer for local models,
at 4 characters a token otherwise), plus N warm-up replies at their cap (`turn_max_tokens`), the
probe's answer cap, and 8 tokens of chat markup per message. A simulated user's turns count at
their cap (`user_max_tokens`). The window is the local model's `max_position_embeddings`, or a
`context_length` / `max_model_len` backend option; with none known, nothing is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..errors import InputError
from . import depths, warmups
from .run import Probe, fill

MARKUP = 8          # chat-template tokens around one message (Qwen's <|im_start|>role\n...<|im_end|>\n: 5)


def context_length(backend) -> int | None:
    if backend.context_window():          # an engine bound tighter than the model's window
        return backend.context_window()
    for key in ("context_length", "max_model_len", "n_ctx"):
        v = (backend.options or {}).get(key)
        if v:
            return int(v)
    path = getattr(backend, "model_path", None)
    if callable(path):
        try:
            cfg = json.loads((Path(path()) / "config.json").read_text())
        except (OSError, ValueError, NotImplementedError):
            return None
        n = cfg.get("max_position_embeddings") or cfg.get("n_positions")
        return int(n) if n else None
    return None


def counter(backend):
    """(count(text) -> tokens, how): the local model's tokenizer (no weights loaded), else chars/4."""
    path = getattr(backend, "model_path", None)
    if callable(path):
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(path()))
            return (lambda t: len(tok(t, add_special_tokens=False)["input_ids"])), "the model's tokenizer"
        except Exception:  # noqa: BLE001 - an estimate: fall back to characters
            pass
    return (lambda t: (len(t) + 3) // 4), "4 characters a token"


def needed(probe: Probe, kind: str, depth: int, count, opts, answer_cap: int) -> int:
    plan = probe.plan(kind)
    texts = [m.content for m in plan.head]
    if kind == "simulated":
        texts.append(fill(plan.opener, ""))
        user = depth * opts.user_max_tokens
    else:
        turns = [t.text for t in plan.turns[:depth]]
        texts += ([fill(plan.opener, turns[0])] + turns[1:]) if turns else []
        user = 0
    texts += [m.content for m in probe.messages if m.role != "system"]
    n_msgs = len(plan.head) + 2 * depth + 1
    return count("\n".join(texts)) + user + depth * opts.turn_max_tokens + answer_cap + MARKUP * n_msgs


def check_context(backend, probes: Sequence[Probe], opts) -> None:
    """InputError naming the first depth that would overflow the window, and its token count."""
    window = context_length(backend)
    deep = [d for d in depths(opts) if d > 0]
    if not window or not deep or not probes:
        return
    count, how = counter(backend)
    cap = backend.decoding.max_tokens if backend.decoding and backend.decoding.max_tokens else 256
    for d in deep:
        for kind in warmups(opts):
            seen: set[str] = set()
            for p in probes:
                plan = p.plan(kind)
                if plan.id in seen and p.max_tokens is None:
                    continue
                seen.add(plan.id)
                n = needed(p, kind, d, count, opts, p.max_tokens or cap)
                if n > window:
                    raise InputError(f"depth {d} needs about {n} tokens of context ({kind} warm-up, {plan.key}; "
                                     f"estimated with {how}), more than the model's {window}; use smaller depths "
                                     "or a lower turn_max_tokens", field="--set depths")


def check_options(opts, model_spec: str | None = None) -> None:
    if "simulated" in warmups(opts) and not opts.user_model:
        raise InputError("warmup=simulated needs a user model: --set user_model=BACKEND:NAME "
                         "(the model that plays the user; it may be the --model itself)", field="--set user_model")


def user_backend(opts, backend):
    """The simulated user's backend: the model under test itself when user_model names it."""
    from ..errors import RoleboundError
    from ..models import create_backend

    spec = str(opts.user_model).strip()
    if spec in (backend.spec, backend.name):
        return backend
    try:
        return create_backend(spec, backend.decoding, strict=False)
    except RoleboundError as exc:
        raise InputError(str(exc), field="--set user_model") from None


def setup(settings, backend) -> None:
    """check(): fail early on bad options; keep the backends for select() and before_items()."""
    opts = settings.options
    check_options(opts)
    settings.state.dialogue_backend = backend
    if "simulated" in warmups(opts):
        settings.state.dialogue_user = user_backend(opts, backend)


def attach(session, settings) -> None:
    """before_items(): calls with role "user" go to the simulated user's backend."""
    user = settings.state.dialogue_user
    if user is not None:
        session.add_backend("user", user)
