"""The knowledge_errors suite (knowledge errors of role-playing characters): see README.md beside this file.

The suite class is imported on first use (plugins.lazy_exports)."""

from ...plugins import lazy_exports

__all__ = ["KnowledgeErrorsSuite"]
__getattr__ = lazy_exports(__name__, {"KnowledgeErrorsSuite": ".suite"})
