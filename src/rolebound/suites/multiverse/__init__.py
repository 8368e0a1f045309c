"""The multiverse suite (Beyond One World, superhero versions): see README.md beside this file.

The suite class is imported on first use (plugins.lazy_exports)."""

from ...plugins import lazy_exports

__all__ = ["MultiverseSuite"]
__getattr__ = lazy_exports(__name__, {"MultiverseSuite": ".suite"})
