"""`TemporalRuns`: start, list, decide, abort and show agent and flow runs on Temporal, as the
CLI, `Agent` and `Flow` do against a store.

    runs = await TemporalRuns.connect("localhost:7233")
    run_id = await runs.start("docs", "Fix the typo in docs/index.md")
    for call in await runs.inbox():              # no worker needed
        await runs.decide(call.run_id, call.call_id, Approve())   # rejected at once if stale
    result = await runs.result(run_id)
    run_id = await runs.start_flow("coaching", "I want to run a 4:25 1500m")
    await runs.reply(run_id, "43, 40 km a week")   # a flow that waits for the user
    await runs.pause(run_id); await runs.resume(run_id)   # at a step boundary, then on
    await runs.resume(run_id, budget=Budget(cost_usd=2))  # a run over its budget

Decisions by Update need a live worker (it validates them); `decide(..., wait=False)` sends a
Signal instead, checked when the run applies it. The inbox reads search attributes and memos.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.errordetails.v1 import WorkflowNotReadyFailure
from temporalio.client import (
    Client,
    Interceptor,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from loopstate.engine.approval import ApprovalRequest, Approve, Deny, Edit, as_decision
from loopstate.engine.budget import Budget
from loopstate.engine.errors import DecisionError, LoopstateError, RunNotFound, RunNotResumable
from loopstate.engine.events import Event
from loopstate.engine.result import RunResult
from loopstate.engine.state import RunState
from loopstate.engine.tree import UsageReport
from loopstate.machines.flows.result import FlowResult
from loopstate.temporal.data import (
    AGENT_ATTRIBUTE,
    FLOW_WORKFLOW,
    STATUS_ATTRIBUTE,
    WORKFLOW,
    AbortRequest,
    DecideRequest,
    PauseRunRequest,
    PendingCall,
    ReplyRequest,
    ResumeRunRequest,
    RetryRequest,
    RunSettings,
    StartFlow,
    StartRun,
)
from loopstate.temporal.worker import DEFAULT_TASK_QUEUE, data_converter


class TemporalRuns:
    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        settings: RunSettings | None = None,
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        by_reference = client.data_converter.payload_codec is not None
        self.settings = settings or RunSettings(by_reference=by_reference)

    @classmethod
    async def connect(
        cls,
        address: str = "localhost:7233",
        *,
        namespace: str = "default",
        blobs: str | Path | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        settings: RunSettings | None = None,
        interceptors: Sequence[Interceptor] = (),
    ) -> TemporalRuns:
        """Connect with loopstate's data converter (and `blobs` for payloads by reference).
        `interceptors` go to the client, and to the workers built on it: e.g.
        `loopstate.telemetry.temporal_interceptors()` to trace runs with OpenTelemetry."""
        client = await Client.connect(
            address,
            namespace=namespace,
            data_converter=data_converter(blobs),
            interceptors=interceptors,
        )
        return cls(client, task_queue=task_queue, settings=settings)

    async def start(self, agent: str, prompt: str, *, run_id: str | None = None) -> str:
        """Start a run of the served agent `agent`; returns its run id (the workflow id)."""
        start = StartRun(agent=agent, prompt=prompt, settings=self.settings)
        run_id = run_id or f"{agent}-{_short_id()}"
        await self.client.start_workflow(
            WORKFLOW, start, id=run_id, task_queue=self.task_queue, result_type=RunResult
        )
        return run_id

    async def start_flow(
        self,
        flow: str,
        message: str,
        *,
        data: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Start a run of the served flow `flow` with the user's first message (and any data
        known up front); returns its run id (the workflow id)."""
        start = StartFlow(flow=flow, message=message, data=data or {}, settings=self.settings)
        run_id = run_id or f"{flow}-{_short_id()}"
        await self.client.start_workflow(
            FLOW_WORKFLOW, start, id=run_id, task_queue=self.task_queue, result_type=FlowResult
        )
        return run_id

    async def reply(self, run_id: str, message: str, *, actor: str = "user") -> None:
        """The user's next message to a flow run that waits for it (an Update: refused at once,
        `RunNotResumable`, if the run does not wait for the user)."""
        try:
            await _execute(
                self._handle(run_id), "reply", ReplyRequest(message=message, actor=actor)
            )
        except WorkflowUpdateFailedError as exc:
            raise RunNotResumable(_reason(exc)) from None
        except RPCError as exc:
            raise _not_found(run_id, exc) from None

    async def flow_result(self, run_id: str) -> FlowResult:
        """Wait for a flow run to end and return its result (its phase and data with it)."""
        handle = self.client.get_workflow_handle(run_id, result_type=FlowResult)
        result: FlowResult = await handle.result()
        return result

    async def usage(self, run_id: str) -> UsageReport:
        """The run's usage: its own, the total with its child runs', and per agent (a Query)."""
        report: UsageReport = await self._query(run_id, "usage", UsageReport)
        return report

    async def result(self, run_id: str) -> RunResult:
        """Wait for the run to end (following continue-as-new) and return its result."""
        return await self._handle(run_id).result()

    async def state(self, run_id: str, *, within: float | None = None) -> RunState:
        """The run's state now (a Query: needs a live worker, or an ended run). With
        `within`, a run no worker answers for in that many seconds (none serves it, or its
        workflow task keeps failing) raises `LoopstateError` saying which."""
        if within is None:
            state: RunState = await self._query(run_id, "state", RunState)
            return state
        handle = self._handle(run_id)
        try:
            answered: RunState = await handle.query(
                "state", result_type=RunState, rpc_timeout=timedelta(seconds=within)
            )
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise _not_found(run_id, exc) from None
            raise await _unanswered(handle, run_id, within, exc) from None
        except WorkflowQueryFailedError as exc:
            raise await _unanswered(handle, run_id, within, exc) from None
        return answered

    async def pending(self, run_id: str) -> list[ApprovalRequest]:
        """The calls waiting for a decision in the run and in its child runs (sub-agents,
        agent phases), each naming the run it waits in; decide them through this run."""
        pending: list[ApprovalRequest] = await self._query(run_id, "pending", list[ApprovalRequest])
        return pending

    async def events(self, run_id: str) -> list[Event]:
        events: list[Event] = await self._query(run_id, "events", list[Event])
        return events

    async def inbox(self, *, agent: str | None = None) -> list[PendingCall]:
        """Every call waiting for a decision, across runs: read from search attributes and
        memos, so it needs no worker."""
        query = f"{STATUS_ATTRIBUTE} = 'awaiting_approval' AND ExecutionStatus = 'Running'"
        if agent is not None:
            query += f" AND {AGENT_ATTRIBUTE} = '{_quoted(agent)}'"
        calls: list[PendingCall] = []
        async for execution in self.client.list_workflows(query):
            memo = await execution.memo()
            agent_name = str(memo.get("loopstate_agent", ""))
            for request in memo.get("loopstate_pending", []):
                where = {"run_id": execution.id, "agent": agent_name}
                calls.append(PendingCall(**{**request, **where}))
        return calls

    async def decide(
        self, run_id: str, call_id: str, decision: Any, *, actor: str = "user", wait: bool = True
    ) -> None:
        """Decide a pending call. `wait=True` (an Update): refused at once with the reason
        (`DecisionError`) if the call is unknown, decided, stale or the edit is invalid.
        `wait=False` (a Signal): fire and forget; refused later, reported as an event."""
        form = as_decision(decision).model_dump(mode="json")
        request = DecideRequest(call_id=call_id, decision=form, actor=actor)
        handle = self._handle(run_id)
        if not wait:
            await handle.signal("decide", request)
            return
        try:
            await _execute(handle, "decide", request, ApprovalRequest)
        except WorkflowUpdateFailedError as exc:
            raise DecisionError(_reason(exc)) from None
        except RPCError as exc:
            raise _not_found(run_id, exc) from None

    async def approve(self, run_id: str, call_id: str, *, actor: str = "user") -> None:
        await self.decide(run_id, call_id, Approve(), actor=actor)

    async def deny(self, run_id: str, call_id: str, reason: str, *, actor: str = "user") -> None:
        await self.decide(run_id, call_id, Deny(reason), actor=actor)

    async def edit(
        self, run_id: str, call_id: str, arguments: dict[str, Any], *, actor: str = "user"
    ) -> None:
        await self.decide(run_id, call_id, Edit(arguments), actor=actor)

    async def abort(
        self, run_id: str, reason: str, *, actor: str = "user", wait: bool = True
    ) -> None:
        """End the run in `aborted` at its next step boundary (at once if it is waiting)."""
        request = AbortRequest(reason=reason, actor=actor)
        handle = self._handle(run_id)
        if not wait:
            await handle.signal("abort", request)
            return
        try:
            await _execute(handle, "abort", request)
        except WorkflowUpdateFailedError as exc:
            raise DecisionError(_reason(exc)) from None
        except RPCError as exc:
            raise _not_found(run_id, exc) from None

    async def retry(self, run_id: str, *, actor: str = "user") -> None:
        """Call the model again for a run resting in `model_failed` (its retries spent);
        `RunNotResumable` if it is not there."""
        try:
            await _execute(self._handle(run_id), "retry", RetryRequest(actor=actor))
        except WorkflowUpdateFailedError as exc:
            raise RunNotResumable(_reason(exc)) from None
        except RPCError as exc:
            raise _not_found(run_id, exc) from None

    async def pause(self, run_id: str, *, actor: str = "user", wait: bool = True) -> bool:
        """Ask a running run to stop at its next step boundary (nothing in flight); it rests
        in `paused` until `resume`. True if it was running; False if it is not (a run that
        waits for a decision keeps waiting). `wait=False` sends a Signal (no answer)."""
        request = PauseRunRequest(actor=actor)
        handle = self._handle(run_id)
        if not wait:
            await handle.signal("pause", request)
            return True
        return bool(await self._update(run_id, "pause", request, bool))

    async def resume(
        self, run_id: str, *, budget: Budget | None = None, actor: str = "user"
    ) -> None:
        """Continue a run resting in `paused`, or in `budget_exceeded` with `budget` raising
        the limits it names; `RunNotResumable` (saying which limit) if it cannot go on."""
        await self._update(run_id, "resume", ResumeRunRequest(actor=actor, budget=budget), None)

    async def _update(self, run_id: str, name: str, request: Any, result_type: Any) -> Any:
        try:
            return await _execute(self._handle(run_id), name, request, result_type)
        except WorkflowUpdateFailedError as exc:
            raise RunNotResumable(_reason(exc)) from None
        except RPCError as exc:
            raise _not_found(run_id, exc) from None

    def _handle(self, run_id: str) -> WorkflowHandle[Any, RunResult]:
        return self.client.get_workflow_handle(run_id, result_type=RunResult)

    async def _query(self, run_id: str, name: str, result_type: Any) -> Any:
        try:
            return await self._handle(run_id).query(name, result_type=result_type)
        except RPCError as exc:
            raise _not_found(run_id, exc) from None


async def load_state(url: str, run_id: str) -> RunState:
    """A run's state from a `temporal://HOST:PORT[/NAMESPACE]` address (for the CLI)."""
    address, _, namespace = url.removeprefix("temporal://").partition("/")
    runs = await TemporalRuns.connect(address, namespace=namespace or "default")
    return await runs.state(run_id)


async def _unanswered(
    handle: WorkflowHandle[Any, RunResult], run_id: str, within: float, exc: Exception
) -> LoopstateError:
    """Why a run's Query got no answer, from its description (which needs no worker)."""
    try:
        described = await handle.describe()
    except RPCError:
        return LoopstateError(f"run {run_id}: no answer within {within:g} s: {exc}")
    raw = described.raw_description
    task = raw.pending_workflow_task
    if raw.HasField("pending_workflow_task") and task.attempt > 1:
        return LoopstateError(
            f"run {run_id}: its workflow task has failed {task.attempt - 1} time(s), so no "
            "worker can answer for it (the agent or the code changed since it started? "
            "`loopstate temporal replay` its history to see what); it stays "
            f"{described.status.name if described.status else 'unknown'} on Temporal"
        )
    queue = raw.execution_config.task_queue.name or "its task queue"
    return LoopstateError(
        f"run {run_id}: no worker answered within {within:g} s (is one serving {queue}?)"
    )


async def _execute(
    handle: WorkflowHandle[Any, RunResult], name: str, request: Any, result_type: Any = None
) -> Any:
    """Send the Update `name`, again (with the same update id) while Temporal answers that the
    workflow task carrying it failed (`WorkflowNotReady`): the server then drops the Update
    unapplied, e.g. when the task that completes the run meets an event that arrived meanwhile
    (a child's end). Retried a few times, never forever; another error is the caller's."""
    update_id = str(uuid.uuid4())
    for _ in range(_NOT_READY_TRIES - 1):
        try:
            return await handle.execute_update(name, request, id=update_id, result_type=result_type)
        except RPCError as exc:
            if not _not_ready(exc):
                raise
    return await handle.execute_update(name, request, id=update_id, result_type=result_type)


_NOT_READY_TRIES = 5


def _not_ready(exc: RPCError) -> bool:
    """Temporal's answer that the workflow task carrying an Update failed (the Update was not
    applied; sending it again is what the server asks)."""
    return exc.status == RPCStatusCode.FAILED_PRECONDITION and any(
        detail.Is(WorkflowNotReadyFailure.DESCRIPTOR) for detail in exc.grpc_status.details
    )


def _reason(exc: WorkflowUpdateFailedError) -> str:
    cause = exc.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause or exc)


def _not_found(run_id: str, exc: RPCError) -> LoopstateError:
    text = str(exc)
    if "not found" in text.lower():
        return RunNotFound(f"no run {run_id!r} on Temporal: {text}")
    if "already completed" in text.lower():
        return RunNotResumable(f"run {run_id} has ended: {text}")
    return LoopstateError(f"run {run_id}: {text}")


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _short_id() -> str:
    return uuid.uuid4().hex[:12]


__all__ = ["TemporalRuns", "load_state"]
