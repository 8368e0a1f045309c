"""The torch engine with its prefix KV kept across calls against the same engine keeping it within a
call only (`prefix_cache_mb=0`), on CHARM's calls in the order and batches the runner sends them.

    .venv/bin/python bench/torch_prefix.py [--model bundled] [--roles 6] [--per-role 24] [--batch 16]
                                           [--rounds 3] [--max-tokens 8]

Both engines load in one process and run in turns, round by round; each figure is the median over
rounds. It prints wall seconds, prefill tokens computed and saved, and how many answers (best
option; greedy text) agree between the two. Time it on an idle machine: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def requests(roles: int, per_role: int):
    """CHARM's BA (Yes/No) and BC/KV (options) calls of the first `roles` characters, in data order."""
    from rolebound.records import Message
    from rolebound.models.base import ScoreRequest
    from rolebound.suites.charm.data import expand, load_data
    from rolebound.suites.charm.prompts import ANSWER_PREFIX, ba_prompt, mcq_prompt

    items, _ = expand(load_data()[0])
    names = list(dict.fromkeys(i.role for i in items))[:roles]
    picked = [i for r in names for i in [i for i in items if i.role == r][:per_role]]
    out = []
    for i in picked:
        if i.stage == "ba":
            out.append(ScoreRequest(messages=[Message(role="user", content=ba_prompt(i))], continuations=["Yes", "No"]))
        else:
            out.append(ScoreRequest(messages=[Message(role="user", content=mcq_prompt(i))],
                                    assistant_prefix=ANSWER_PREFIX,
                                    continuations=[str(k) for k in range(1, len(i.options) + 1)]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--roles", type=int, default=6)
    ap.add_argument("--per-role", type=int, default=24)
    ap.add_argument("--batch", type=int, default=16, help="requests handed to the engine at a time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=8, help="the generation workload's reply length")
    a = ap.parse_args(argv)

    from rolebound.models import create_backend
    from rolebound.models.base import GenRequest
    from rolebound.records import Decoding

    reqs = requests(a.roles, a.per_role)
    gens = [GenRequest(messages=r.messages, max_tokens=a.max_tokens) for r in reqs]
    dec = Decoding(max_tokens=a.max_tokens)
    engines = {"kept across calls": create_backend(a.model).engine,
               "within a call only": create_backend(a.model, prefix_cache_mb=0).engine}
    for e in engines.values():                          # warm-up: weights, float32 copy, its cost
        e.score(reqs[:4])
        e.generate(gens[:2], dec)
    times: dict[str, dict[str, list[float]]] = {n: {"score": [], "generate": []} for n in engines}
    prefill: dict[str, dict[str, dict[str, int]]] = {}
    answers: dict[str, dict[str, list]] = {}
    for _ in range(a.rounds):
        for name, e in engines.items():
            for work in ("score", "generate"):
                if e.kv:
                    e.kv.clear()                         # every round starts with nothing kept
                before = dict(e.prefill)
                t0 = time.perf_counter()
                got = []
                for k in range(0, len(reqs), a.batch):
                    got += e.score(reqs[k:k + a.batch]) if work == "score" else e.generate(gens[k:k + a.batch], dec)
                times[name][work].append(time.perf_counter() - t0)
                prefill.setdefault(name, {})[work] = {x: e.prefill[x] - before[x] for x in before}
                answers.setdefault(name, {})[work] = [g.logprobs.index(max(g.logprobs)) if work == "score"
                                                      else g.text for g in got]
    print(f"model {a.model}, {len(reqs)} CHARM calls ({a.roles} roles x {a.per_role}), batches of {a.batch}, "
          f"{a.rounds} rounds, load average {os.getloadavg()[0]:.2f}")
    print("| prefix KV | work | wall s (median) | prefill computed | prefill saved |")
    print("|---|---|---|---|---|")
    for name in engines:
        for work in ("score", "generate"):
            p = prefill[name][work]
            print(f"| {name} | {work} | {statistics.median(times[name][work]):.2f} | {p['computed']} | {p['saved']} |")
    names = list(engines)
    for work in ("score", "generate"):
        same = sum(x == y for x, y in zip(answers[names[0]][work], answers[names[1]][work]))
        ratio = statistics.median(times[names[1]][work]) / statistics.median(times[names[0]][work])
        print(f"{work}: {same}/{len(reqs)} answers agree; within-a-call / kept-across-calls wall = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
