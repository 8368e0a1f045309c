"""An example rolebound plugin: the `echo` suite and the `reverse` backend."""

from .backend import ReverseBackend
from .suite import EchoSuite

__all__ = ["EchoSuite", "ReverseBackend"]
