"""The mcq suite (a generic multiple-choice suite): see README.md beside this file.

The suite class is imported on first use (plugins.lazy_exports)."""

from ...plugins import lazy_exports

__all__ = ["MCQSuite"]
__getattr__ = lazy_exports(__name__, {"MCQSuite": ".suite"})
