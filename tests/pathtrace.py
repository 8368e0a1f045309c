"""The path one call takes, from `rolebound run` to the backend and to report.html (issue 41).

`trace(tmp)` runs `rolebound run charm --model fake:random --limit 5` in this process and returns
two chains of (module, function), each from `cli.run` down:
- `model`: the stack when the backend gets its first request. asyncio tasks split a stack, so each
  task's chain is joined to the frames that created it (a task factory keeps, for each task, its
  parent's chain plus the parent's frames at the moment of creation);
- `report`: the stack when report.html is written.

A hand-off is control passing to another module along a chain: a reader opens one more file.
`handoffs(chain)` counts them; the report's chain is counted after the frame it shares with the model's.
Run `python tests/pathtrace.py` to print both chains.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rolebound"
ASYNCIO = Path(asyncio.__file__).parent


def _ours(frame) -> tuple[str, str] | None:
    path = Path(frame.f_code.co_filename).resolve()
    try:
        rel = path.relative_to(SRC.parent)
    except ValueError:
        return None
    mod = ".".join(rel.with_suffix("").parts)
    return (mod.removesuffix(".__init__"), frame.f_code.co_qualname)


def _frames(start) -> list:
    out, f = [], start
    while f is not None:
        out.append(f)
        f = f.f_back
    return out[::-1]          # outermost first


def _since_loop(frames: list) -> list:
    """The frames of the running task's coroutines: those after the event loop's callback runner
    (asyncio's Handle._run, which steps the task)."""
    last = max((i for i, f in enumerate(frames) if Path(f.f_code.co_filename) == ASYNCIO / "events.py"
                and f.f_code.co_name == "_run"), default=-1)
    return frames[last + 1:]


def _chain(frames: list) -> list[tuple[str, str]]:
    return [c for c in map(_ours, frames) if c is not None]


class _Tracer:
    def __init__(self):
        self.chains: dict[int, list[tuple[str, str]]] = {}
        self.model: list[tuple[str, str]] | None = None
        self.report: list[tuple[str, str]] | None = None

    def joined(self, frames: list) -> list[tuple[str, str]]:
        task = asyncio.current_task() if _running() else None
        if task is None:
            return _chain(frames)
        return self.chains.get(id(task), []) + _chain(_since_loop(frames))

    def factory(self, loop, coro, **kw):
        frames = _frames(sys._getframe(1))
        chain = self.joined(frames)
        task = asyncio.Task(coro, loop=loop, **kw)
        self.chains[id(task)] = chain
        return task


def _running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def trace(tmp: Path, monkeypatch) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    from rolebound.cli import app
    from rolebound.models.fake import FakeBackend
    from rolebound.report.builder import Report

    t = _Tracer()
    real_run, real_score, real_generate, real_write = asyncio.run, FakeBackend.score, FakeBackend.generate, Report.write

    def run(main, **kw):
        async def with_factory():
            asyncio.get_running_loop().set_task_factory(t.factory)
            return await main
        # the main task itself is made by asyncio.run, before the factory is set: its chain is
        # the synchronous frames that called asyncio.run
        t.chains["main"] = _chain(_frames(sys._getframe(1)))
        return real_run(_with_main(t, with_factory()), **kw)

    def catch(frames, name):
        if t.model is None:     # the backend's own method is next: this wrapper stands in for it
            t.model = t.joined(frames) + [("rolebound.models.fake", f"FakeBackend.{name}")]

    async def score(self, *a, **kw):
        catch(_frames(sys._getframe(0)), "score")
        return await real_score(self, *a, **kw)

    async def generate(self, *a, **kw):
        catch(_frames(sys._getframe(0)), "generate")
        return await real_generate(self, *a, **kw)

    def write(self, *a, **kw):
        if t.report is None:
            t.report = _chain(_frames(sys._getframe(0))) + [("rolebound.report.builder", "Report.write")]
        return real_write(self, *a, **kw)

    monkeypatch.setattr(asyncio, "run", run)
    monkeypatch.setattr(FakeBackend, "score", score)
    monkeypatch.setattr(FakeBackend, "generate", generate)
    monkeypatch.setattr(Report, "write", write)
    argv = ["run", "charm", "--model", "fake:random", "--limit", "5", "--out", str(tmp / "run"), "--no-cache", "-q"]
    try:
        app(argv)
    except SystemExit as exc:
        assert not exc.code, exc
    return _from_cli(t.model), _from_cli(t.report)


async def _with_main(t: _Tracer, coro):
    t.chains[id(asyncio.current_task())] = t.chains.pop("main")
    return await coro


def _from_cli(chain):
    assert chain, "the traced call never happened"
    start = next(i for i, (m, f) in enumerate(chain) if (m, f) == ("rolebound.cli", "run"))
    return chain[start:]


def handoffs(chain) -> int:
    return sum(1 for a, b in zip(chain, chain[1:]) if a[0] != b[0])


def shared(a, b) -> int:
    """How many frames two chains share from the start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


if __name__ == "__main__":
    class _MP:
        def setattr(self, obj, name, value):
            setattr(obj, name, value)

    with tempfile.TemporaryDirectory() as d:
        model, report = trace(Path(d), _MP())
    k = shared(model, report)
    print("to the backend:")
    for m, f in model:
        print(f"  {m}.{f}")
    print("to report.html (after the first", k, "frames):")
    for m, f in report[k - 1:]:
        print(f"  {m}.{f}")
    print(f"hand-offs: {handoffs(model)} to the backend + {handoffs(report[k - 1:])} to the report; "
          f"functions: {len(model)} + {len(report) - k}")
