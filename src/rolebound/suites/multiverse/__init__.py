"""The multiverse suite (Beyond One World, superhero versions): see README.md beside this file.

The suite class is imported on first use, so that the registry and the CLI can look at this
package (its cli.py, importers.py) without loading the suite."""

__all__ = ["MultiverseSuite"]


def __getattr__(name: str):
    if name == "MultiverseSuite":
        from .suite import MultiverseSuite

        return MultiverseSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
