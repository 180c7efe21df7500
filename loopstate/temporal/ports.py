"""The engine's ports as a workflow provides them: no I/O, no wall clock, no randomness.

store  → `WorkflowStore`: the run state kept in the workflow's memory (history is the log)
clock  → `workflow.now()`
model  → `ActivityModel`: one activity (or local activity) per model step, its passing
         errors retried by Temporal under the agent's `RetryPolicy`
tools  → `ActivityTools`: one activity per approved call, timeout and retries from the tool
log    → `ReplaySafeLog`: silent while the workflow replays
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from loopstate.engine.errors import IncompatibleRun, ModelError, RunBusy, RunNotFound
from loopstate.engine.executor import Executor
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.retry import RetryPolicy as ModelRetry
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.store import (
    Cursor,
    KeptAnswer,
    Order,
    PauseRequest,
    RunEvent,
    RunSummary,
    summarize,
)
from loopstate.engine.tool import Tool, ToolContext
from loopstate.machines.flows.result import FlowDeps
from loopstate.temporal.data import (
    MODEL_ACTIVITY,
    TOOL_ACTIVITY,
    ModelCall,
    ModelStep,
    RunSettings,
    ToolCallRun,
)

ALWAYS_SCHEDULED = "loopstate-tool-activity-always-scheduled"
"""The patch (`workflow.patched`) from which a call's tool activity is scheduled even when
the served agent lacks its tool (before it, the workflow failed the run without one)."""


def workflow_clock() -> float:
    """The workflow's deterministic time (that of the current workflow task)."""
    return workflow.now().timestamp()


class WorkflowStore:
    """The store port over the workflow's own memory: Temporal's history makes it durable,
    so saving is keeping the latest state; there are no leases (one workflow, one writer)."""

    def __init__(self) -> None:
        self.state: RunState | None = None
        self.children: dict[str, RunState] = {}
        """The run's child runs (and theirs) as they last told it, without their messages:
        what the engine's tree reads (pending calls, usage, a child's outcome)."""
        self.above: dict[str, RunState] = {}
        """A child run's tree above it, as its parent told it when it started (without
        messages): counted toward the tree's budget (`child_budget`)."""
        self.pause_request: PauseRequest | None = None
        """A pause asked by the workflow's Update or Signal `pause` (see `limits`)."""

    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        self.state = state

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        self.state = state
        return state

    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        return None

    async def load(self, run_id: str) -> RunState:
        if self.state is not None and self.state.run_id == run_id:
            return self.state
        if run_id in self.children:
            return self.children[run_id]
        if run_id in self.above:
            return self.above[run_id]
        raise RunNotFound(f"no run {run_id!r} in this workflow")

    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        return await self.load(run_id)

    async def release(self, run_id: str, *, owner: str) -> None:
        return None

    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        state = self.state
        if state is None or status not in (None, state.status) or cursor is not None:
            return []
        return [summarize(state)]

    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        raise RunBusy("a workflow's run is driven by its workflow: nothing to claim")

    # A workflow serves no HTTP: no event log and no idempotency keys (Temporal's own ids).

    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        return []

    async def last_event_id(self) -> int:
        return 0

    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        return None

    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        return None

    async def drop_key(self, key: str) -> None:
        return None

    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        self.pause_request = self.pause_request or PauseRequest(by=by, at=now)

    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        return self.pause_request

    async def drop_pause(self, run_id: str) -> None:
        self.pause_request = None

    async def keep_definition(self, fingerprint: str, body: dict[str, Any]) -> None:
        return None  # a workflow's run is its history; the worker keeps no definitions

    async def definition(self, fingerprint: str) -> dict[str, Any] | None:
        return None


class ActivityModel:
    """The model port as an activity on the worker that serves the agent. An error that may
    pass is retried by Temporal (durably: no sleep in a worker) by `retry`, the agent's own
    `RetryPolicy` (attempts, first wait doubling up to `max_delay_s`; the provider's
    `retry-after` instead when it said); without one, `settings.model_attempts` attempts.
    Once they are spent the step raises the last `ModelError`: the run rests in
    `model_failed` until a `retry` (or an `abort`) arrives, as a local run waits for `resume`."""

    def __init__(
        self, agent: str, name: str, settings: RunSettings, retry: ModelRetry | None = None
    ) -> None:
        self.agent = agent
        self._name = name
        self.settings = settings
        self.retry = retry
        self.classifying: Callable[[], RunState] | None = None
        """The run whose calls the activity classifies (`ModelCall.classify`), if asked."""
        self._step: ModelStep | None = None

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        s = self.settings
        call = ModelCall(agent=self.agent, request=request)
        if self.classifying is not None:
            run = self.classifying()
            data = dict(run.flow.data) if run.flow is not None else None
            call = call.evolve(classify=True, run_id=run.run_id, rules=run.rules, data=data)
        if not s.by_reference:
            size = len(call.model_dump_json())
            if size > s.payload_limit:
                raise ModelError(
                    f"the transcript ({size} bytes) is past the payload limit ({s.payload_limit}); "
                    "start runs with a blob store (TemporalRuns(..., blobs=DIR)) to pass it by "
                    "reference"
                )
        timeout = timedelta(seconds=s.model_timeout_s)
        retry = temporal_retry(self.retry, s.model_attempts)
        step: ModelStep
        try:
            execute = (
                workflow.execute_local_activity if s.local_model else workflow.execute_activity
            )
            step = await execute(
                MODEL_ACTIVITY,
                call,
                result_type=ModelStep,
                start_to_close_timeout=timeout,
                retry_policy=retry,
            )
        except ActivityError as exc:
            raise model_error(exc) from None
        self._step = step
        return step

    def recorded(self, response: ModelResponse) -> list[CallRecord] | None:
        """The calls of `response` (the last step's reply, with the run's call ids) as the
        activity classified them, recorded in the history; None if it did not (a history
        recorded before it did, or a worker that does not): the loop classifies them then."""
        step, self._step = self._step, None
        calls = response.message.calls
        if step is None or step.records is None or len(step.records) != len(calls):
            return None
        return [
            r.evolve(call_id=c.id, tool=c.name, raw_arguments=c.function.arguments)
            for r, c in zip(step.records, calls, strict=True)
        ]


def temporal_retry(policy: ModelRetry | None, attempts: int) -> RetryPolicy:
    """Temporal's retry policy for a model step: the agent's `RetryPolicy`, else `attempts`."""
    if policy is None:
        return RetryPolicy(maximum_attempts=attempts)
    return RetryPolicy(
        initial_interval=timedelta(seconds=policy.backoff_s),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=max(policy.max_delay_s, policy.backoff_s)),
        maximum_attempts=policy.attempts,
    )


def model_error(exc: ActivityError) -> ModelError:
    """The `ModelError` a failed model activity reported (status, type, retry-after kept); a
    worker that died or timed out on every attempt is a `timeout`, which may pass."""
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.details:
        facts = cause.details[0] if isinstance(cause.details[0], dict) else {}
        return ModelError(
            cause.message,
            status=facts.get("status"),
            error_type=facts.get("error_type"),
            provider_message=facts.get("provider_message"),
            retry_after=facts.get("retry_after"),
        )
    timed_out = isinstance(cause, ActivityTimeout)
    return ModelError(
        f"model activity failed: {cause or exc}", error_type="timeout" if timed_out else None
    )


class ActivityTools:
    """Runs each approved call as one activity with the tool's timeout; an idempotent tool is
    retried by Temporal, a non-idempotent one only while its body has not begun (the activity
    marks that in its heartbeat before it starts the body): an attempt that may have had its
    effect (its worker died, it timed out) reaches the model as "outcome unknown", as
    `Executor.recover` reports it after a crash in a local run."""

    def __init__(self, agent: str, tools: Mapping[str, Tool], settings: RunSettings) -> None:
        self.agent = agent
        self.tools = tools
        self.settings = settings
        self._executor = Executor(tools)

    async def __call__(self, record: CallRecord, ctx: ToolContext[Any]) -> CallRecord:
        tool, s = self.tools.get(record.tool), self.settings
        patched = workflow.patched(ALWAYS_SCHEDULED)  # asked at every call: marked once
        if tool is None and not patched:
            line = f"the served agent lacks tool {record.tool}, which call {record.call_id} needs"
            raise IncompatibleRun(ctx.run_id, (line,))  # as runs recorded before the patch did
        # A deploy may have removed the tool since the call's activity ran: the activity is
        # scheduled all the same (a replay makes the commands it made; a new attempt fails
        # non-retryably as `IncompatibleRun`, once), with the defaults for what it would say.
        timeout, retries = (tool.timeout, tool.retries) if tool is not None else (None, 0)
        limit = timeout if timeout is not None else s.tool_timeout_s
        idempotent = tool is not None and tool.idempotent
        attempts = s.idempotent_attempts if idempotent else s.unstarted_attempts
        data = dict(ctx.deps.data) if isinstance(ctx.deps, FlowDeps) else None
        try:
            finished: CallRecord = await workflow.execute_activity(
                TOOL_ACTIVITY,
                ToolCallRun(agent=self.agent, run_id=ctx.run_id, record=record, data=data),
                result_type=CallRecord,
                start_to_close_timeout=timedelta(seconds=limit * (retries + 1) + 30),
                heartbeat_timeout=timedelta(seconds=s.heartbeat_s),
                retry_policy=RetryPolicy(maximum_attempts=attempts),
            )
            return finished
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "IncompatibleRun":
                said = cause.message.partition("(nothing was changed): ")[2] or cause.message
                raise IncompatibleRun(ctx.run_id, tuple(said.split("; "))) from None
            if idempotent:  # retried and still lost: say so, it may be run again
                text = f"Error: {record.tool} could not be run: {exc.cause or exc}"
                return record.evolve(status="failed", result=text)
            return self._executor.recover(record, ask_again=False)


class ReplaySafeLog:
    """A bound structlog logger that stays silent while the workflow replays its history
    (every line is written once, when it first happens)."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def bind(self, **values: Any) -> ReplaySafeLog:
        return ReplaySafeLog(self._log.bind(**values))

    def is_enabled_for(self, level: int) -> bool:
        check = getattr(self._log, "is_enabled_for", None)
        return True if check is None else bool(check(level))

    def _at(self, level: int, event: str, **fields: Any) -> None:
        if workflow.unsafe.is_replaying():
            return
        self._log.log(level, event, **fields)

    def debug(self, event: str, **fields: Any) -> None:
        self._at(logging.DEBUG, event, **fields)

    def info(self, event: str, **fields: Any) -> None:
        self._at(logging.INFO, event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._at(logging.WARNING, event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        self._at(logging.ERROR, event, **fields)
