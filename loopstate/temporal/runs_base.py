"""What every loopstate workflow does (`AgentWorkflow`, `FlowWorkflow`): drive the run's
stepper on a `RunCore` between step boundaries, take decisions by Update (validated at once by
the checker a local run uses) or Signal, abort, retry after a model error, continue as new,
and keep its child runs (`ChildWorkflows`). Not a workflow itself: each kind declares its own
`@workflow.init` and `@workflow.run`, and inherits these handlers.

    run:  drive ──▶ ended            → tell children and parent, return the result
               ├──▶ model_failed      → wait for a retry (Update) or an abort
               ├──▶ budget_exceeded   → wait for a resume (a raised budget) or an abort
               ├──▶ waiting           → publish, wait for a decision, a reply, a child, abort,
               │                        or the earliest deadline (a timer: expiries queued)
               ├──▶ paused (asked)    → wait for a resume or an abort (see `limits`)
               └──▶ paused (long run) → wait for handlers, continue as new with the state
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow

from loopstate.engine.approval import ApprovalRequest, as_decision
from loopstate.engine.core import Cause, RunCore, Stepper
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import DecisionError, RunNotResumable
from loopstate.engine.events import DecisionRefused, Event, RunResumed, RunStarted
from loopstate.engine.state import CallRecord, QueuedDecision, RunState
from loopstate.engine.tool import Tool
from loopstate.engine.tree import UsageReport
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.agent.steps import LoopSteps
from loopstate.temporal.child_budget import rests_at_budget
from loopstate.temporal.children import ChildWorkflows
from loopstate.temporal.data import (
    AbortRequest,
    ChildState,
    DecideRequest,
    ResumeRunRequest,
    RetryRequest,
)
from loopstate.temporal.limits import rests, take_resume, wait_woken
from loopstate.temporal.ports import WorkflowStore, workflow_clock
from loopstate.temporal.publish import Publisher


class Boundaries:
    """The run's `Stepper`, with what happens between two steps in a workflow: an abort, what
    arrived (decisions, a reply), and a pause for continue-as-new."""

    def __init__(self, wf: RunWorkflow) -> None:
        self.wf = wf
        self.inner = wf.stepper

    def ended(self) -> bool:
        return self.inner.ended()

    def end(self, how: Any, cause: Cause) -> None:
        self.inner.end(how, cause)

    def reset(self) -> None:
        self.inner.reset()

    async def step(self) -> bool:
        wf = self.wf
        if wf.abort_request is not None:
            request = wf.abort_request
            await wf.core.end(self.inner, "abort", Cause(request.reason, request.actor))
            return True
        await wf.take_arrived()
        if self.inner.ended():
            return True
        if wf.pause_due() and wf.store.pause_request is None:  # a pause asked goes first
            wf.paused = True
            return False
        return await self.inner.step()


class RunWorkflow:
    """The handlers and the run loop every loopstate workflow shares."""

    core: RunCore
    store: WorkflowStore
    stepper: Stepper
    publisher: Publisher
    children: ChildWorkflows
    continue_after: int
    first_step: int

    def setup(self, state: RunState, known: tuple[RunState, ...]) -> None:
        """The fields every kind sets once its core and stepper are built."""
        self.arrived: list[QueuedDecision] = []
        self.abort_request: AbortRequest | None = None
        self.retry_request: RetryRequest | None = None
        self.resume_request: ResumeRunRequest | None = None
        self.paused = False
        self.first_step = state.steps
        self.children.aborting = lambda: self.abort_request
        for child in known:
            self.store.children[child.run_id] = child

    # -- what each kind adds -----------------------------------------------------------------

    def loop(self) -> LoopSteps | None:
        """The agent loop decisions apply to now (a flow's model phase's; None otherwise)."""
        raise NotImplementedError

    def tools(self) -> Mapping[str, Tool]:
        """The tools of the calls that may wait now (their edits are checked by them)."""
        raise NotImplementedError

    def carried(self) -> Any:
        """The input that continues this run as new."""
        raise NotImplementedError

    def woken(self) -> bool:
        """Something arrived that the run, waiting, must take."""
        return (
            bool(self.arrived)
            or self.abort_request is not None
            or self.resume_request is not None
            or self.children.changed
        )

    async def take_arrived(self) -> None:
        """Apply the decisions that arrived, at a step boundary, through the one decision
        path (`Decisions.queued`)."""
        loop = self.loop()
        if not self.arrived:
            return
        queued, self.arrived = self.arrived, []
        if loop is None:  # no agent loop of this run waits now (a flow's agent or code phase)
            core = self.core
            for q in queued:
                why = f"run {core.state.run_id} has no call {q.call_id} waiting in it now"
                await core.emit(DecisionRefused(**core.at(), call_id=q.call_id, actor=q.actor,
                                                reason=why))  # fmt: skip
            return
        state = loop.state.evolve(inbox=(*loop.state.inbox, *queued))
        await loop.commit(loop.decisions.queued(state))

    # -- the run loop ------------------------------------------------------------------------

    async def drive(self, fresh: bool, model: str) -> None:
        """Drive the run until it has ended for good (its children told, its parent too)."""
        core, stepper = self.core, Boundaries(self)
        if fresh:
            await core.emit(RunStarted(**core.at(), machine=core.state.machine, model=model))
        else:
            await core.emit(RunResumed(**core.at(), state=core.state.state, recovered=()))
        while True:
            await take_resume(self)
            self.publish()
            self.children.changed = False
            await core.drive(stepper)
            self.publish()
            await self.children.tell_parent(core.state)
            if stepper.ended():
                if self.finished():
                    await self.children.abort_unfinished(core.state)
                    return
                if self.children.parent is not None and not rests_at_budget(core.state):
                    # a child does not rest (one at the tree's budget does: `child_budget`)
                    await self.fail_after_model_error()
                    continue
                await workflow.wait_condition(self.rest_over)
                if self.resume_request is None:  # a resume is taken at the loop's top
                    await self.after_model_failed()
                continue
            if self.paused:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.carried())
            await wait_woken(self)  # or the earliest deadline of its waiting calls

    def publish(self) -> None:
        """Status and pending calls for the inbox; a child's calls are listed by its top run."""
        pending = [] if self.children.parent is not None else self.pending()
        self.publisher.publish(self.core.state, pending)

    def finished(self) -> bool:
        """Ended for good (not resting in `model_failed` or `budget_exceeded`)."""
        return self.stepper.ended() and not rests(self.core.state)

    def rest_over(self) -> bool:
        """Someone acted on a resting run: a retry, a resume (raised budget), an abort."""
        asked = (self.retry_request, self.resume_request, self.abort_request)
        return any(a is not None for a in asked)

    async def after_model_failed(self) -> None:
        """Leave `model_failed` as asked: abort the run, or call the model again."""
        abort, loop = self.abort_request, self.loop()
        if abort is not None or loop is None:
            why = abort or AbortRequest(reason="no loop to retry", actor="system")
            self.core.state = self.core.state.evolve(stop_reason=f"aborted: {why.reason}")
            self.stepper.end("abort", Cause(why.reason, why.actor))
        else:
            request, self.retry_request = self.retry_request, None
            assert request is not None
            loop.state = loop.state.evolve(error=None, failure=None)
            loop.send(Cause("retry after a model error", request.actor), loop.machine.retry)
        await self.core.save()

    async def fail_after_model_error(self) -> None:
        """A child run whose model step failed for good fails, as a local child run does."""
        self.stepper.end("fail", Cause(self.core.state.error, "system"))
        await self.core.save()

    def pause_due(self) -> bool:
        """Continue as new at a step boundary: back in `thinking` (no call in flight), after
        `continue_after_steps` model steps here or when Temporal suggests it."""
        if self.core.state.state != AgentLoop.thinking.id:
            return False
        steps = self.core.state.steps - self.first_step
        return steps >= self.continue_after or workflow.info().is_continue_as_new_suggested()

    # -- decisions ---------------------------------------------------------------------------

    @workflow.update(name="decide")
    def decide(self, request: DecideRequest) -> ApprovalRequest:
        """Queue a validated decision; it is applied at once if the run is waiting. A call
        that waits in a child run is sent to that run (Signal), checked here first."""
        owner = self.children.owner(request.call_id, self.core.state)
        if owner is not None:
            return self.children.forward(owner, request).request()
        record = self._check(request)
        self.arrived.append(self._queued(request))
        return record.request()

    @decide.validator
    def _validate_decide(self, request: DecideRequest) -> None:
        owner = self.children.owner(request.call_id, self.core.state)
        if owner is not None:
            self.children.check(owner, request)
            return
        self._check(request)

    @workflow.signal(name="decide")
    def decide_later(self, request: DecideRequest) -> None:
        """Fire and forget: checked when applied (a child's call: checked here and sent to
        its run); a refused one is reported (`decision_refused`)."""
        try:
            owner = self.children.owner(request.call_id, self.core.state)
            if owner is not None:
                self.children.forward(owner, request)
            else:
                self.arrived.append(self._queued(request))
        except DecisionError as exc:  # not a usable decision: nothing to queue
            core = self.core
            core.events.append(
                DecisionRefused(
                    **core.at(), call_id=request.call_id, actor=request.actor, reason=str(exc)
                )
            )

    @workflow.update(name="abort")
    def abort(self, request: AbortRequest) -> None:
        self.abort_request = self.abort_request or request

    @abort.validator
    def _validate_abort(self, request: AbortRequest) -> None:
        if self.finished() or self.abort_request is not None:
            raise RunNotResumable(
                f"run {self.core.state.run_id} has ended ({self.core.state.state})"
            )

    @workflow.signal(name="abort")
    def abort_later(self, request: AbortRequest) -> None:
        self.abort_request = self.abort_request or request

    @workflow.update(name="retry")
    def retry(self, request: RetryRequest) -> None:
        """Call the model again for a run resting in `model_failed`."""
        self.retry_request = self.retry_request or request

    @retry.validator
    def _validate_retry(self, request: RetryRequest) -> None:
        state = self.core.state
        if state.state != AgentLoop.model_failed.id or self.retry_request is not None:
            raise RunNotResumable(
                f"run {state.run_id} is {state.state}, not model_failed: nothing to retry"
            )

    @workflow.signal(name="child")
    def child_changed(self, report: ChildState) -> None:
        """A child run tells how it (and its own children) stand now."""
        self.children.took(report)

    def _check(self, request: DecideRequest) -> CallRecord:
        """The one checker a local run uses (`check_decision`), counting the decisions that
        arrived and wait for the next step boundary as queued."""
        arrived = {q.call_id for q in self.arrived}
        return check_decision(
            self.core.state, request.call_id, request.decision, tools=self.tools(), queued=arrived
        ).call

    def _queued(self, request: DecideRequest) -> QueuedDecision:
        decision = as_decision(request.decision)
        return QueuedDecision(
            call_id=request.call_id, decision=decision, actor=request.actor, at=workflow_clock()
        )

    # -- queries -----------------------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> RunState:
        return self.core.state

    @workflow.query(name="pending")
    def pending(self) -> list[ApprovalRequest]:
        """The run's calls waiting for a decision, and its child runs' (each naming its run)."""
        return self.children.pending(self.core.state)

    @workflow.query(name="usage")
    def usage(self) -> UsageReport:
        """The run's usage: its own, the total with its child runs', and per agent."""
        return self.children.usage(self.core.state)

    @workflow.query(name="events")
    def events(self) -> list[Event]:
        """The workflow run's events (since the run started, or continued as new)."""
        return list(self.core.events)
