"""The knowledge_errors suite: see README.md beside this file."""

from .suite import KnowledgeErrorsSuite

__all__ = ["KnowledgeErrorsSuite"]
