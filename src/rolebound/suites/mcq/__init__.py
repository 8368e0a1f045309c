"""The mcq suite (a generic multiple-choice suite): see README.md beside this file.

The suite class is imported on first use, so that the registry and the CLI can look at this
package (its cli.py, importers.py) without loading the suite."""

__all__ = ["MCQSuite"]


def __getattr__(name: str):
    if name == "MCQSuite":
        from .suite import MCQSuite

        return MCQSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
