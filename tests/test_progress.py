"""The plain progress lines (logs, CI): rate and ETA leave out the items done at the start (a resumed
run's recorded ones), so they do not promise an ETA of seconds for work that takes minutes."""

from __future__ import annotations

import re

import pytest

from rolebound import loop

from helpers import write_mcq


def test_rate_leaves_out_the_resumed_items(monkeypatch, capsys):
    now = [1000.0]
    monkeypatch.setattr(loop.time, "perf_counter", lambda: now[0])
    p = loop._PlainProgress(200, "run")
    p.advance(n=140)                 # resumed from records: all at once
    for _ in range(20):              # then one item every 15 s
        now[0] += 15.0
        p.advance()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    rate, eta = re.search(r"([\d.]+) items/s, elapsed \d+s, ETA (\d+)s", last).groups()
    assert float(rate) == pytest.approx(20 / 300, abs=0.005)   # 20 items in 300 s since the resume
    assert int(eta) == round(40 * 15)                  # the 40 left at 15 s each, not 40 s


def test_items_that_finish_in_batches_give_the_mean_rate(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(loop.time, "perf_counter", lambda: now[0])
    p = loop._PlainProgress(620, "charm")
    now[0] = 0.01
    p.advance()                                    # resumed
    for burst in (52, 133, 225):                   # a batch of 15 every minute or so
        for i in range(15):
            now[0] = burst + i * 0.001
            p.advance()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "32/620" in last and "0.14 items/s" in last     # 31 items in 225 s, not the burst's edge


def test_first_second_counts_everything_done_so_far(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(loop.time, "perf_counter", lambda: now[0])
    p = loop._PlainProgress(10, "run")
    now[0] = 5.0
    p.advance()
    assert "0.20 items/s" in capsys.readouterr().err


def test_jobs_cancelled_by_an_interrupt_are_not_counted_as_done(monkeypatch):
    import asyncio

    from rolebound import runner

    advanced = []

    class Prog:
        def start(self):
            pass

        def advance(self, _task=None, n=1):
            advanced.append(n)

        def stop(self):
            pass

    monkeypatch.setattr(runner, "make_progress", lambda total, label, enabled=True, **kw: (Prog(), 0))

    async def fn(job):
        await asyncio.sleep(0 if job < 2 else 60)
        return job

    async def interrupted():
        # Ctrl-C inside asyncio.run cancels the main task; so does this, once jobs 0 and 1 are done
        t = asyncio.create_task(runner.bounded(list(range(6)), fn, concurrency=6, progress=True))
        await asyncio.sleep(0.05)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t

    asyncio.run(interrupted())
    assert len(advanced) == 2                   # jobs 0 and 1 finished; 2-5 were cancelled


def test_a_run_of_repeats_counts_jobs_and_says_what_a_job_is(tmp_path, capsys):
    # 3 items x 2 repeats (or strategies): the bar's total is 6 jobs, not "6 items" (stderr is no
    # terminal here, so the plain lines)
    from rolebound import api

    api.run("mcq", model="fake:random", data=str(write_mcq(tmp_path / "q.jsonl", 3)),
            repeats=2, allow_greedy_repeats=True, out=tmp_path / "r",
            use_cache=False)
    err = capsys.readouterr().err
    assert "mcq: 6 jobs (3 items x 2 repeats)" in err
    assert re.search(r"mcq: 6/6 jobs, [\d.]+ jobs/s", err)
    api.run("mcq", model="fake:random", data=str(write_mcq(tmp_path / "q.jsonl", 3)),
            out=tmp_path / "r1", use_cache=False)
    assert "mcq: 3 items" in capsys.readouterr().err


def test_an_engine_loaded_inside_the_items_is_left_out_of_the_rate(monkeypatch, capsys):
    # local engines load at the first call the cache cannot answer (runner.Session._load): the
    # 20 s of a load are not one item's work, or the ETA of the whole run counts them again
    now = [0.0]
    monkeypatch.setattr(loop.time, "perf_counter", lambda: now[0])
    p = loop._PlainProgress(100, "run")
    now[0] = 20.0                    # the load
    loop.rate_from_now()
    for _ in range(10):              # then one item a second
        now[0] += 1.0
        p.advance()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "1.00 items/s" in last and "ETA 90s" in last, last     # not 0.33 items/s, ETA 270 s
    p.stop()
    now[0] += 5.0
    loop.rate_from_now()             # a finished bar is let go
    assert p.base == (20.0, 0)


@pytest.mark.model
def test_a_fresh_run_on_the_bundled_model_times_its_items_from_the_load(tmp_path, monkeypatch):
    # through the session: the bar's base moves when the engine has loaded
    import rolebound.runner as runner
    from rolebound import api

    seen = []
    monkeypatch.setattr(runner, "rate_from_now", lambda: seen.append(True))
    api.run("mcq", model="bundled", data=str(write_mcq(tmp_path / "q.jsonl", 2)), out=tmp_path / "r",
            progress=False, use_cache=False)
    assert seen == [True]
