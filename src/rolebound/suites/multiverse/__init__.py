"""The multiverse suite: see README.md beside this file."""

from .suite import MultiverseSuite

__all__ = ["MultiverseSuite"]
