"""The capability suite (RoleCapBench, role capability boundaries): see README.md beside this file.

The suite class is imported on first use, so that the registry and the CLI can look at this
package (its cli.py, importers.py) without loading the suite."""

__all__ = ["CapabilitySuite"]


def __getattr__(name: str):
    if name == "CapabilitySuite":
        from .suite import CapabilitySuite

        return CapabilitySuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
