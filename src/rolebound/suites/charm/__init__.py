"""The charm suite (CHARM, character knowledge boundaries): see README.md beside this file.

The suite class is imported on first use, so that the registry and the CLI can look at this
package (its cli.py, importers.py) without loading the suite."""

__all__ = ["CharmSuite"]


def __getattr__(name: str):
    if name == "CharmSuite":
        from .suite import CharmSuite

        return CharmSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
