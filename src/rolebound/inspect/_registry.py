"""The `inspect_ai` entry point: importing it registers the tasks (`rolebound/charm`, ...) and the
model provider (`--model rolebound/bundled`)."""

from inspect_ai.model import modelapi

from .tasks import capability, charm, knowledge_errors, multiverse  # noqa: F401


@modelapi(name="rolebound")
def rolebound():
    from .provider import RoleboundModel     # rolebound's backends load only when asked for

    return RoleboundModel
