"""Why a run failed, as data a caller can act on (not only as text): kept on `RunState`,
shown on `RunResult.failure`."""

from __future__ import annotations

from loopstate.engine.budget import Overrun
from loopstate.engine.data import Frozen
from loopstate.engine.errors import ModelError, fixable_failure


class RunFailure(Frozen):
    """The error that ended a run in `failed`."""

    error: str
    """The exception's class name and message (as `RunState.error`)."""
    status: int | None = None
    """For a model error: the provider's HTTP status (529 when Anthropic is overloaded)."""
    error_type: str | None = None
    provider_message: str | None = None
    retry_after: float | None = None
    """Seconds the provider asked to wait before trying again, when it said."""
    budget: Overrun | None = None
    """For a run resting in `budget_exceeded`: which limit, and what had been spent."""

    @property
    def fixable(self) -> bool:
        """A model error a person fixes in the set-up (an API key, the model's name), then
        resumes the run: see `loopstate.engine.errors.fixable_failure`."""
        return fixable_failure(self.status, self.error_type)


def failure_of(exc: BaseException) -> RunFailure:
    error = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, ModelError):
        return RunFailure(error=error)
    return RunFailure(
        error=error,
        status=exc.status,
        error_type=exc.error_type,
        provider_message=exc.provider_message,
        retry_after=exc.retry_after,
    )
