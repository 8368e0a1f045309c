"""Re-judge an existing run with another judge model, without regenerating answers."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError
from .store import RunDir
from .suites import get_suite


def rejudge(run_dir: str | Path, judge: str, *, progress: bool = True) -> None:
    manifest = RunDir(run_dir).read_manifest()
    suite = get_suite(manifest.suite)
    if not getattr(suite, "uses_judge", False) or not hasattr(suite, "rejudge"):
        raise InputError(f"suite {manifest.suite} has no judge to replace", field="--judge")
    suite.rejudge(Path(run_dir), judge, progress=progress)
