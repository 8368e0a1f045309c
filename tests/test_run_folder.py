"""No lost records: a full disk ends the run with one line naming the file, and every file but
records.jsonl is replaced whole, so a failed write leaves the previous version intact."""

from __future__ import annotations

import errno
import json
from pathlib import Path

from rolebound import cli
from rolebound.store import RunDir

from helpers import write_mcq


class FullDisk:
    """A file handle that takes `room` lines, then fails like a full disk."""

    def __init__(self, fh, room: int):
        self.fh, self.room = fh, room

    def write(self, text):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= 1
        return self.fh.write(text)

    def __getattr__(self, name):
        return getattr(self.fh, name)


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_full_disk_ends_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    data = write_mcq(tmp_path / "q.jsonl", 8)
    out = tmp_path / "run"
    opened = RunDir.open_for_append

    def open_small(self):
        opened(self)
        self._fh = FullDisk(self._fh, room=3)

    monkeypatch.setattr(RunDir, "open_for_append", open_small)
    code = cli._main(["run", "mcq", "--model", "fake:random", "--data", str(data), "--out", str(out), "-q",
                      "--concurrency", "1"])
    assert code == 2
    err = one_line(capsys)
    assert str(out / "records.jsonl") in err and "No space left" in err
    assert len((out / "records.jsonl").read_text().splitlines()) == 3     # what fitted is kept
    monkeypatch.setattr(RunDir, "open_for_append", opened)
    assert cli._main(["run", "mcq", "--model", "fake:random", "--data", str(data), "--out", str(out), "-q"]) == 0
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len({r["call_id"] for r in recs}) == 8 and len(recs) == 8       # resumed, nothing twice


def test_a_failed_report_write_keeps_the_old_report(tmp_path, monkeypatch, capsys):
    data = write_mcq(tmp_path / "q.jsonl", 4)
    out = tmp_path / "run"
    assert cli._main(["run", "mcq", "--model", "fake:random", "--data", str(data), "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real = Path.write_text

    def half_then_full(self, text, *a, **kw):
        if self.name.endswith(".tmp") and "report.html" in self.name:
            real(self, text[: len(text) // 2], *a, **kw)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, text, *a, **kw)

    monkeypatch.setattr(Path, "write_text", half_then_full)
    assert cli._main(["report", str(out)]) == 2
    err = one_line(capsys)
    assert str(out / "report.html") in err and "No space left" in err
    assert (out / "report.html").read_bytes() == before["report.html"]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
