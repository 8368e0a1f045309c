"""Errors a user can act on. The CLI prints them in one line and exits with code 2."""

from __future__ import annotations


class RoleboundError(Exception):
    """Base class for errors caused by input or configuration, not by a bug."""

    exit_code = 2


class InputError(RoleboundError):
    """Bad data or config: names the file, line and field so the user can fix it."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.file, self.line, self.field, self.detail = file, line, field, message
        where = []
        if file:
            where.append(str(file) + (f":{line}" if line else ""))
        if field:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class BackendError(RoleboundError):
    """A model backend cannot be created or cannot do what was asked (missing extra, capability)."""


class CapabilityError(BackendError):
    """The backend lacks a capability the strategy needs (e.g. raw completion for Injection)."""
