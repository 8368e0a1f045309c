"""The charm suite: see README.md beside this file."""

from .suite import CharmSuite

__all__ = ["CharmSuite"]
