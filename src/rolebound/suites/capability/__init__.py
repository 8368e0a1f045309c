"""The capability suite: see README.md beside this file."""

from .suite import CapabilitySuite

__all__ = ["CapabilitySuite"]
