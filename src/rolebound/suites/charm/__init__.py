"""The charm suite (CHARM, character knowledge boundaries): see README.md beside this file.

The suite class is imported on first use (plugins.lazy_exports)."""

from ...plugins import lazy_exports

__all__ = ["CharmSuite"]
__getattr__ = lazy_exports(__name__, {"CharmSuite": ".suite"})
