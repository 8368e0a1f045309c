"""The mcq suite's one strategy: the rendered template, scored by the options' letters or answered."""

from __future__ import annotations

from ...records import LETTERS, Message
from ...scoring.parsers import parse_first_letter


async def run_item(item, ctx, text: str, opts, scoring: str | None) -> None:
    letters = LETTERS[: len(item.options)]
    chat = opts.chat
    meta = {"group": getattr(item, opts.group, None)} if opts.group else {}
    meta.update(mc="answer", labels=list(letters))     # for rolebound.stats.position_bias
    if scoring == "logprob":
        # Raw text: " A" after "Answer:" (lm-eval's target delimiter); chat: the assistant
        # turn opens with the letter.
        conts = [("" if chat else " ") + L for L in letters]
        kw = {"messages": [Message(role="user", content=text)]} if chat else {"prompt": text}
        await ctx.score("answer", conts, parse=lambda r: r.strip(), gold=item.answer, meta=meta, **kw)
        return
    max_tokens = opts.max_tokens
    stop = ["\n"] if opts.stop_newline else None
    parse = lambda r: parse_first_letter(r, letters)  # noqa: E731
    if chat:
        await ctx.chat("answer", [Message(role="user", content=text)], parse=parse, gold=item.answer,
                       max_tokens=max_tokens, stop=stop, meta=meta)
    else:
        await ctx.complete("answer", text, parse=parse, gold=item.answer, max_tokens=max_tokens,
                           stop=stop, meta=meta)

