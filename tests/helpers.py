"""Small builders shared by tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# the installed `rolebound` script beside this interpreter: CLI tests run it in a subprocess
SCRIPT = Path(sys.executable).with_name("rolebound")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


def rolebound(*args, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run the installed script (arguments as str or Path); kw go to subprocess.run (cwd, env)."""
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def refused(res, *says: str) -> str:
    """A refusal through the installed script: exit 2, one line holding each of `says`, no traceback."""
    err = res.stderr.strip()
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for s in says:
        assert s in err, err
    return err


def write_mcq(path: Path, n: int, *, bad_line: int | None = None) -> Path:
    """n four-option questions; the answer cycles A..D."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = {"id": f"q{i}", "question": f"Question number {i}?", "options": ["w", "x", "y", "z"],
                   "answer": "ABCD"[i % 4]}
            if bad_line is not None and i + 1 == bad_line:
                row["answer"] = "Q"
            fh.write(json.dumps(row) + "\n")
    return path


PROVENANCE = "give a `source` or a `note` (where this text comes from)"


def assert_refused_without_provenance(suite: str, data: Path, where: str, out: Path) -> None:
    """`rolebound run SUITE --data DATA` through the installed script: exit 2, one line naming `where`
    (file, line, field) and the missing provenance, no traceback, the file unchanged, no run folder."""
    before = data.read_bytes()
    r = rolebound("run", suite, "--model", "fake:random", "--data", data, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {where}: {PROVENANCE}"]
    assert data.read_bytes() == before and not out.exists()


def rendered_markdown(md: str) -> str:
    """The HTML a CommonMark renderer (raw HTML allowed, as GitHub's before its filter) makes of a
    markdown file: what a reader's browser would get."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)


def raw_tags(md: str) -> list[str]:
    """The markup the hostile texts of the tests carry (scripts, comments, images, javascript:
    links, bold tags) where a renderer passes it through from a markdown file."""
    import re

    return re.findall(r"<(?:script|/script|!--|img src=x|a href=\"javascript|b>)[^>]*>?", rendered_markdown(md))
