"""The capability suite (RoleCapBench, role capability boundaries): see README.md beside this file.

The suite class is imported on first use (plugins.lazy_exports)."""

from ...plugins import lazy_exports

__all__ = ["CapabilitySuite"]
__getattr__ = lazy_exports(__name__, {"CapabilitySuite": ".suite"})
