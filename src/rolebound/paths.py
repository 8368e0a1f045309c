"""Where rolebound keeps things between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """ROLEBOUND_CACHE_DIR, else $XDG_CACHE_HOME/rolebound, else ~/.cache/rolebound."""
    env = os.environ.get("ROLEBOUND_CACHE_DIR")
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "rolebound"
    path.mkdir(parents=True, exist_ok=True)
    return path


def derived_dir() -> Path:
    """Work derived from items alone (embeddings, similarity tables): ROLEBOUND_DERIVED_DIR, else
    <cache_dir>/derived. Its entries are keyed by their inputs, so several caches may share one."""
    env = os.environ.get("ROLEBOUND_DERIVED_DIR")
    return Path(env) if env else cache_dir() / "derived"


def model_dir() -> Path:
    """Converted local models (ROLEBOUND_MODEL_DIR, else <cache_dir>/models)."""
    env = os.environ.get("ROLEBOUND_MODEL_DIR")
    path = Path(env) if env else cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def shared_root() -> Path | None:
    """The public data beside the checkout: ROLEBOUND_SHARED, else ../shared of the checkout (or of
    the working directory) when present; None otherwise."""
    env = os.environ.get("ROLEBOUND_SHARED")
    if env:
        return Path(env)
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (base.parent / "shared").is_dir():
            return base.parent / "shared"
    return None
