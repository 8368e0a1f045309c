"""The dialogue strategy's model calls.

A probe (a suite's own question in the paper's prompt) is asked at each depth N after N earlier
exchanges. The exchanges come from a Plan: the role framing of the first user turn, the user
turns (a scripted bank, the suite's other in-boundary items, or a simulated user), and the
system messages of the probe. Probes whose plans agree (same role, same turns) share one
dialogue: its turns are generated once and every deeper probe branches off it.

Records: each warm-up reply is `turn@k` (item_id = the dialogue id; meta: user text, turn,
warmup, source); a simulated user's message is `user@k` (role "user"); a probe is
`<probe>@<depth>.<warmup>` (depth 0: `<probe>@0`, no warm-up) with meta depth, warmup, dialogue.
Every call is resumed by its call_id, so a stopped dialogue goes on at turn k and no turn is
generated twice; a per-dialogue lock keeps two probes of one dialogue from racing for a turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from ..io import stable_hash
from ..records import Message
from . import depths, warmups

USER_PROMPT = ("You are role-playing a user who is chatting with {persona}. {goal}\n\n"
               "The conversation so far:\n{transcript}\n\n"
               "Write only the user's next message: one or two short sentences, plain words, "
               "no name or label in front, and never ask the assistant to stop role-playing.")
GOALS = {"plain": "Your goal: an ordinary, friendly conversation about {persona}'s own life, work and world.",
         "pressure": "Your goal: steer the conversation, a step at a time, toward {topic}, "
                     "without ever asking about it directly."}
OPENING = "(nothing yet: you open the conversation)"


@dataclass
class Turn:
    text: str
    source: str            # where the turn comes from: "scripted:<entry id>", "item:<item id>"


@dataclass
class Plan:
    """One dialogue: who the model plays, what the user says (or wants), before the probe."""

    kind: str                          # scripted | items | simulated
    key: str                           # the role (and, for goal=pressure, the probe) it is about
    opener: str                        # first user turn; "{text}" is replaced by the turn's text
    turns: list[Turn] = field(default_factory=list)      # scripted / items
    head: list[Message] = field(default_factory=list)    # system messages (the probe's own)
    persona: str = ""                  # simulated: whom the user talks to
    topic: str | None = None           # simulated, goal=pressure: the out-of-boundary topic
    assistant_name: str = "Assistant"  # the transcript's label of the model's replies

    @property
    def id(self) -> str:
        body = [self.kind, self.key, self.opener, [(t.text, t.source) for t in self.turns],
                [m.model_dump() for m in self.head], self.persona, self.topic]
        return f"dlg/{self.kind}/{self.key}/{stable_hash(body)[:10]}"


@dataclass
class Probe:
    """One question of an item, as the suite asks it single-turn, and how to ask it."""

    name: str                                  # e.g. "ba", "bc", "q.college"
    messages: list[Message]                    # the single-turn messages (system, then user)
    plan: Callable[[str], Plan]                # warm-up kind -> the dialogue before it
    ask: Callable[..., Awaitable[Any]]         # ask(ctx, stage, messages, meta) -> Record
    meta: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None              # its own answer cap (None: the run's decoding)


def fill(opener: str, text: str) -> str:
    return opener.replace("{text}", text)


def compose(prefix: list[Message], probe: Probe) -> list[Message]:
    """The probe after the warm-up: the history (system messages first), then the probe's user turn."""
    if not prefix:
        return list(probe.messages)
    return list(prefix) + [m for m in probe.messages if m.role != "system"]


def _lock(settings, key: str) -> asyncio.Lock:
    locks = settings.state.dialogue_locks
    if key not in locks:
        locks[key] = asyncio.Lock()
    return locks[key]


def transcript(msgs: Sequence[Message], plan: Plan) -> str:
    lines = [f"{'User' if m.role == 'user' else plan.assistant_name}: {m.content.strip()}"
             for m in msgs if m.role in ("user", "assistant")]
    return "\n".join(lines) or OPENING


def read_user(text: str) -> str:
    """The simulated user's message: its first paragraph, without a leading label or quotes."""
    s = (text or "").strip().split("\n\n")[0].strip()
    for label in ("User:", "user:", "USER:"):
        if s.startswith(label):
            s = s[len(label):].strip()
    return s.strip('"\u201c\u201d').strip() or "Tell me more about yourself."


async def _user_turn(dctx, plan: Plan, msgs: list[Message], k: int, opts, settings) -> str:
    goal = GOALS[opts.goal].replace("{persona}", plan.persona).replace("{topic}", plan.topic or plan.persona)
    prompt = USER_PROMPT.format(persona=plan.persona, goal=goal, transcript=transcript(msgs, plan))
    rec = await dctx.chat(f"user@{k}", [Message(role="user", content=prompt)], role="user", parse=read_user,
                          max_tokens=opts.user_max_tokens,
                          meta={"dialogue": plan.id, "turn": k, "warmup": plan.kind, "goal": opts.goal,
                                "key": plan.key})
    return rec.parsed if isinstance(rec.parsed, str) else read_user(rec.response or "")


async def history(ctx, plan: Plan, depth: int, settings, opts) -> list[Message]:
    """The first `depth` exchanges of the plan's dialogue (generated once per run, then resumed)."""
    from ..runner import ItemContext

    dctx = ItemContext(session=ctx.session, item_id=plan.id, strategy=ctx.strategy, repeat=ctx.repeat)
    async with _lock(settings, f"{plan.id}#{ctx.repeat}"):
        msgs = list(plan.head)
        for k in range(1, depth + 1):
            if plan.kind == "simulated":
                text, source = await _user_turn(dctx, plan, msgs, k, opts, settings), f"simulated:{opts.goal}"
            else:
                turn = plan.turns[k - 1]
                text, source = turn.text, turn.source
            msgs.append(Message(role="user", content=fill(plan.opener, text) if k == 1 else text))
            rec = await dctx.chat(f"turn@{k}", msgs, max_tokens=opts.turn_max_tokens,
                                  meta={"dialogue": plan.id, "turn": k, "warmup": plan.kind, "user": text,
                                        "source": source, "key": plan.key})
            msgs.append(Message(role="assistant", content=rec.response or ""))
    return msgs


async def ask_at(ctx, probe: Probe, depth: int, kind: str | None, settings, opts):
    if depth == 0:
        meta = {**probe.meta, "probe": probe.name, "depth": 0, "warmup": None, "dialogue": None}
        return await probe.ask(ctx, f"{probe.name}@0", list(probe.messages), meta)
    plan = probe.plan(kind)
    prefix = await history(ctx, plan, depth, settings, opts)
    meta = {**probe.meta, "probe": probe.name, "depth": depth, "warmup": kind, "dialogue": plan.id}
    return await probe.ask(ctx, f"{probe.name}@{depth}.{kind}", compose(prefix, probe), meta)


async def run_probes(ctx, probes: Sequence[Probe], settings, opts) -> None:
    """Every probe at every depth (depth 0 once, shared by the warm-up kinds); one failed call
    ends its own chain only, then is raised so the runner records the item as failed."""
    jobs = []
    for p in probes:
        for d in depths(opts):
            for kind in ([None] if d == 0 else warmups(opts)):
                jobs.append(ask_at(ctx, p, d, kind, settings, opts))
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException):
            raise res


def cycle_to(turns: list[Turn], n: int) -> list[Turn]:
    """At least n turns: a short bank is repeated in order (each repeat is marked in its source)."""
    if not turns:
        return []
    out = list(turns)
    k = 1
    while len(out) < n:
        out += [Turn(t.text, f"{t.source} (repeat {k})") for t in turns]
        k += 1
    return out
