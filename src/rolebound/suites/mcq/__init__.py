"""The mcq suite: see README.md beside this file."""

from .suite import MCQSuite

__all__ = ["MCQSuite"]
