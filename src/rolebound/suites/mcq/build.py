"""The mcq suite's `rolebound build` commands: none.

mcq has no construction pipeline and no starter set: its items are the user's own file, written by
hand or by `rolebound data import mcq-csv` (importers.py), so there is nothing to build.
"""

from __future__ import annotations


def commands(app) -> None:
    """Add no command to `app`: mcq has nothing to build (see the module docstring)."""
