"""Errors the user can cause. The CLI prints them on one line and exits 2."""

from __future__ import annotations


class KvdoctorError(Exception):
    """A problem with the user's input; ``hint`` says what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(KvdoctorError):
    """Bad or conflicting command-line flags."""


class ModelConfigError(KvdoctorError):
    """The model could not be found or its config.json is unusable."""


class GpuTargetError(KvdoctorError):
    """A --gpu target that kvdoctor cannot resolve."""


class RulesFileError(KvdoctorError):
    """A rules file that does not load or does not validate."""


class LogInputError(KvdoctorError):
    """A log given to `kvdoctor explain` that cannot be read."""
