"""The knowledge_errors suite (knowledge errors of role-playing characters): see README.md beside this file.

The suite class is imported on first use, so that the registry and the CLI can look at this
package (its cli.py, importers.py) without loading the suite."""

__all__ = ["KnowledgeErrorsSuite"]


def __getattr__(name: str):
    if name == "KnowledgeErrorsSuite":
        from .suite import KnowledgeErrorsSuite

        return KnowledgeErrorsSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
