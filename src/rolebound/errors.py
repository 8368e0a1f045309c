"""Errors a user can act on. The CLI prints them in one line and exits with their code:
2 for bad input or options, 3 when the endpoint stops the run, 130 when interrupted."""

from __future__ import annotations


class RoleboundError(Exception):
    """Base class for errors caused by input or configuration, not by a bug."""

    exit_code = 2


class InputError(RoleboundError):
    """Bad data or config: names the file, line and field so the user can fix it."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.file, self.line, self.field, self.detail = file, line, field, message
        self.dump: str | None = None        # a validator's full report, printed with --debug
        where = []
        if file:
            where.append(str(file) + (f":{line}" if line else ""))
        if field:       # a flag or argument as the user typed it; a file's field by name
            where.append(field if is_flag(field) else f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


def is_flag(field: str) -> bool:
    """'--model', '--set roles', 'SUITE': a command-line flag or argument, not a field of a file."""
    return field.startswith("-") or field.isupper()


def closest(word: str, choices) -> str | None:
    """The choice a mistyped word most likely meant: the same but for case, the closest by difflib,
    or the one choice the word begins; None when none is close."""
    import difflib

    low = {str(c).lower(): str(c) for c in choices}
    w = str(word).lower()
    close = difflib.get_close_matches(w, list(low), n=1, cutoff=0.6)
    starts = [c for k, c in low.items() if w and k.startswith(w)]
    return low.get(w) or (low[close[0]] if close else None) or (starts[0] if len(starts) == 1 else None)


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'x'?)' for closest(), or '' when none is close."""
    best = closest(word, choices)
    return f" (did you mean '{best}'?)" if best else ""


class BackendError(RoleboundError):
    """A model backend cannot be created or cannot do what was asked (missing extra, capability)."""


class CapabilityError(BackendError):
    """The backend lacks a capability the strategy needs (e.g. raw completion for Injection)."""


class RunDirError(RoleboundError):
    """A run folder (or report) file cannot be written (read-only, disk full): one line naming it."""

    def __init__(self, path, exc: OSError):
        self.path = path
        super().__init__(f"cannot write {path}: {exc.strerror or exc}")


class RunStopped(RoleboundError):
    """The run stopped before its end (records kept, resumable); `exit_code` says why."""

    def __init__(self, message: str, exit_code: int = 3):
        super().__init__(message)
        self.exit_code = exit_code


class EndpointError(RoleboundError):
    """The model endpoint cannot serve the run (auth, unknown model, unreachable, N failures in
    a row): the run stops at once with exit code 3; rerunning the same command resumes it."""

    exit_code = 3
