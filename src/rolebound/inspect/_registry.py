"""The `inspect_ai` entry point: importing it registers the tasks (`rolebound/charm`, ...)."""

from .tasks import capability, charm, knowledge_errors, multiverse  # noqa: F401
