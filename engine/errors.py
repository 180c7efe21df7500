"""The exceptions loopstate raises. Control signals (a run waiting for approval) are not errors.

LoopstateError
├── DefinitionError        a tool, agent or machine is declared wrongly
├── ModelError             the model port failed (network, provider, bad reply); `status`,
│   │                      `error_type`, `retry_after`, `retryable`, `fixable` say what to do
│   ├── ScriptExhausted    a ScriptedModel was asked for more turns than it has
│   └── UnexpectedRequest  a ScriptedModel's expectation did not hold
├── DecisionError          a decision was refused; the run is unchanged; `errors` names
│   │                      the fields at fault (`loopstate.engine.decision_check`)
│   ├── NotADecision       not a decision at all (its form is wrong)
│   ├── UnknownCall        the run has no such call
│   ├── NotAwaiting        the run is not waiting for decisions (also a RunNotResumable)
│   ├── AlreadyDecided     the call has its decision already: a decision is used once
│   ├── StaleDigest        made for other arguments than the call's
│   ├── NotAllowed         a kind of decision the call's tool does not accept
│   ├── Forbidden          an approval of a call a forbidding rule of the run matches
│   └── InvalidDecision    a field at fault: an edit or a result that does not fit the
│                          tool's schema, a digest missing where one is required
├── RunNotFound            no run with that id in the store
├── RunBusy                another process holds the run's lease
├── RunNotResumable        the run is finished, or not waiting for what was given
│   └── IncompatibleRun    the resuming agent's definition differs from the run's in a way
│                          it cannot take (`differences`, one line each; nothing changed)
├── ForkRefused            a fork asked for a transition, edit or run it cannot copy
├── StoreError             a stored row is corrupt or from a newer schema, or the store's
│   │                      file is damaged or held locked too long by another process
│   └── RunDamaged         one run's rows cannot be read: listed `damaged`, never rewritten
├── CassetteError          a cassette is unreadable, malformed, or from a newer loopstate
├── ReplayDivergence       a replayed run asked for something other than the recording
│                          (`loopstate.engine.recording.replay`)
├── GraphvizNotFound       SVG or PNG asked for without Graphviz's `dot` installed
├── GraphvizFailed         `dot` refused a diagram (`loopstate.engine.diagram.render`)
├── MCPToolError           an MCP tool answered isError, or its server failed; its message
│                          goes to the model (`loopstate.tools.mcp`, extra `mcp`)
└── ToolError              a built-in tool was called wrongly; its message goes to the model
    └── WorkspaceError     a path escapes the workspace (`loopstate.tools.builtin.workspace`)

Not an error: RunInterrupted (a SystemExit) when a `_sync` call is interrupted (Ctrl-C,
SIGTERM); the run stands where it was saved and `resume` continues it.

Warnings: ToolDefinitionWarning (a UserWarning) when `@tool` accepts a function the model will
understand poorly (a parameter without a type hint, no docstring).

A test (tests/test_public_api.py) checks that this tree names every error class loopstate has.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class LoopstateError(Exception):
    """Root of every error loopstate raises on purpose."""


class DefinitionError(LoopstateError):
    """A tool, agent, flow or machine is declared wrongly, or a command was given a
    malformed argument: fix the definition (the message says what and where)."""


class ModelError(LoopstateError):
    """The model port failed. What a caller can act on is kept apart from the text:

    `status` is the provider's HTTP status as the provider meant it (None when no HTTP
    reply came: a connection error or a reply loopstate could not read), `error_type` the
    provider's error type (`overloaded_error`, `rate_limit_exceeded`, ...; `connection`
    when no reply came), `provider_message` the provider's own message, and `retry_after`
    the seconds the provider asked to wait, when it said.
    """

    status: int | None
    error_type: str | None
    provider_message: str | None
    retry_after: float | None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        provider_message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.provider_message = provider_message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later: a timeout, a rate limit, a provider
        error (5xx, 529 overloaded) or no reply at all."""
        if self.status is None:
            return self.error_type in ("connection", "timeout")
        return self.status in (408, 429) or self.status >= 500

    @property
    def fixable(self) -> bool:
        """Whether the request may succeed once someone fixes the set-up, not on its own: see
        `fixable_failure`. Not retried; the run rests in `model_failed` for a resume."""
        return fixable_failure(self.status, self.error_type)


FIXABLE_TYPES = ("configuration", "unknown_provider")
"""Model error types a person fixes in the set-up: no API key, a model without a provider."""


def fixable_failure(status: int | None, error_type: str | None) -> bool:
    """A model error that the set-up causes and a person fixes, then resumes the run: no
    API key, a key the provider refused (401, 403), a model or address it does not know
    (404), a model name without a provider."""
    return error_type in FIXABLE_TYPES or status in (401, 403, 404)


class ScriptExhausted(ModelError):
    """A `ScriptedModel` was asked for more turns than its script holds."""


class UnexpectedRequest(ModelError):
    """A `ScriptedModel` turn's expectation about the request did not hold."""


class FieldError(NamedTuple):
    """One field of a refused decision and what is wrong with it (`field` is a dotted path:
    an argument of an edit, `value.<path>` of a result, or a decision's own field)."""

    field: str
    message: str


class DecisionError(LoopstateError):
    """A decision was refused (unknown call, other arguments, a second decision, an edit
    that does not fit the tool's schema); the run is unchanged. `errors` lists the fields at
    fault, when the refusal is about fields. The subclasses say which check refused it."""

    errors: tuple[FieldError, ...]

    def __init__(self, message: str, *, errors: tuple[FieldError, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class NotADecision(DecisionError):
    """What was given is not a decision (`as_decision` could not read it)."""


class UnknownCall(DecisionError):
    """The run has no call with that id."""


class AlreadyDecided(DecisionError):
    """The call is not awaiting a decision, or one is queued for it: a decision is used once."""


class StaleDigest(DecisionError):
    """The decision was made for other arguments than the call's (its `digest` differs)."""


class NotAllowed(DecisionError):
    """The call's tool does not accept this kind of decision (`allowed_decisions`)."""


class Forbidden(DecisionError):
    """A forbidding rule of the run (`Rule(..., forbid=True)`) matches the call: no approval
    or edit can let it run, whoever gives it. `rule` names the rule."""

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class InvalidDecision(DecisionError):
    """A field of the decision is at fault (see `errors`): an edit's arguments or a result's
    value do not fit the tool's schema, or a digest is missing where one is required."""


class RunNotFound(LoopstateError):
    """No run with that id in the store."""


class RunBusy(LoopstateError):
    """Another process holds the run's lease: it is being driven elsewhere. Retry later."""


class RunNotResumable(LoopstateError):
    """The run cannot take what was asked: it has ended, waits for something else, or
    the agent given cannot continue it (a missing tool, other instructions)."""


class IncompatibleRun(RunNotResumable):
    """The agent or flow that resumes a run differs from the one that started it in a way
    the run cannot take (a tool its calls need is gone, the state it is in no longer exists,
    a change its `on_change` refuses), and no migration applies: refused before anything
    changed. `differences` lists each, one line apiece (`loopstate.engine.compat`); the
    message is one line, the differences joined by "; "."""

    def __reduce__(self) -> tuple[Any, ...]:  # pickled and copied with its fields
        return (type(self), (self.run_id, self.differences))

    def __init__(self, run_id: str, differences: tuple[str, ...]) -> None:
        self.run_id = run_id
        self.differences = differences
        super().__init__(
            f"run {run_id} cannot resume under this definition (nothing was changed): "
            + "; ".join(differences)
        )


class ForkRefused(LoopstateError):
    """A fork (`Agent.fork`) was refused, nothing written: no such transition, one recorded
    without what a fork needs, an edit that does not fit, or a kind of run not forkable."""


class NotAwaiting(DecisionError, RunNotResumable):
    """The run is not waiting for decisions (it runs, has ended, or waits for the user)."""


class StoreError(LoopstateError):
    """The store failed: a corrupt row or one from a newer schema, a damaged file, a lock
    held too long by another process, or an unreachable database."""


class RunDamaged(StoreError):
    """One run's stored rows cannot be read: a corrupt or lost row, or a run a newer
    loopstate wrote. Listings show it as `damaged` with this reason and go on; reading or
    deciding it is refused; its rows are never rewritten."""


class CassetteError(LoopstateError):
    """A cassette file is missing, unreadable, malformed, or from a newer loopstate."""


class RunInterrupted(SystemExit):
    """A `run_sync`/`resume_sync` call was interrupted (Ctrl-C, SIGTERM): the run was not
    ended, only stopped where its last save left it, and `resume` continues it. A `SystemExit`
    so that an uncaught one ends the program quietly (exit status 128 + the signal's number);
    `line` is what was printed."""

    def __init__(self, run_id: str, signal: str = "SIGINT", *, agent: str | None = None) -> None:
        self.run_id = run_id
        self.signal = signal
        self.line = (
            f"interrupted; resume with: loopstate resume {run_id} --agent {agent or 'MODULE:ATTR'}"
        )
        super().__init__(143 if signal == "SIGTERM" else 130)

    def __str__(self) -> str:
        return self.line


class ToolDefinitionWarning(UserWarning):
    """`@tool` made a tool the model will understand poorly: a parameter without a type hint
    (no type in its schema, nothing validated) or no docstring (its name is its description).
    Silence it with `warnings.filterwarnings("ignore", category=ToolDefinitionWarning)`."""
