"""`AgentWorkflow`: an agent run as a Temporal workflow, driven by the engine itself.

The `AgentLoop` machine and its `LoopSteps` run inside the workflow on a `RunCore`, exactly as
in a local run; only the ports differ (`loopstate.temporal.ports`). Decisions arrive by Update
(validated at once, by the checker a local run uses) or by Signal (checked when applied), and
are applied at a step boundary through the one decision path (`Decisions.queued`).

    run:  drive the loop ──▶ ended            → return the RunResult
                        ├──▶ model_failed      → wait for a retry (Update) or an abort
                        ├──▶ waiting           → publish pending, wait for a decision or abort
                        └──▶ paused (long run) → wait for handlers, continue as new with the state
"""

from __future__ import annotations

import dataclasses

from temporalio import workflow

from loopstate.engine.approval import ApprovalRequest, as_decision
from loopstate.engine.core import Cause, Ending, RunCore, RunPorts
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import DecisionError, DefinitionError, RunNotResumable
from loopstate.engine.events import DecisionRefused, Event, RunResumed, RunStarted
from loopstate.engine.logs import get_logger
from loopstate.engine.models.retry import RetryingModel
from loopstate.engine.models.retry import RetryPolicy as ModelRetry
from loopstate.engine.options import RunOptions
from loopstate.engine.protocol import opening_state
from loopstate.engine.result import RunResult
from loopstate.engine.state import CallRecord, QueuedDecision, RunState
from loopstate.machines.agent.loop import LOOP_FINAL, AgentLoop
from loopstate.machines.agent.resuming import opening_messages
from loopstate.machines.agent.steps import LoopSteps
from loopstate.temporal.catalog import served
from loopstate.temporal.data import WORKFLOW, AbortRequest, DecideRequest, RetryRequest, StartRun
from loopstate.temporal.ports import (
    ActivityModel,
    ActivityTools,
    ReplaySafeLog,
    WorkflowStore,
    workflow_clock,
)
from loopstate.temporal.publish import Publisher


class Boundaries:
    """The loop's `Stepper`, with what happens between two steps in a workflow: an abort, the
    decisions that arrived, and a pause for continue-as-new."""

    def __init__(self, flow: AgentWorkflow) -> None:
        self.flow = flow
        self.loop = flow.loop

    def ended(self) -> bool:
        return self.loop.ended()

    def end(self, how: Ending, cause: Cause) -> None:
        self.loop.end(how, cause)

    def reset(self) -> None:
        self.loop.reset()

    async def step(self) -> bool:
        flow, loop = self.flow, self.loop
        if flow.abort_request is not None:
            request = flow.abort_request
            await loop.core.end(loop, "abort", Cause(request.reason, request.actor))
            return True
        if flow.arrived:
            queued, flow.arrived = flow.arrived, []
            state = loop.state.evolve(inbox=(*loop.state.inbox, *queued))
            await loop.commit(loop.decisions.queued(state))
            if loop.ended():
                return True
        if flow.pause_due():
            flow.paused = True
            return False
        return await loop.step()


@workflow.defn(name=WORKFLOW, failure_exception_types=[DefinitionError])
class AgentWorkflow:
    """An agent run: `StartRun` names the served agent; fails at once (not in task retries)
    when the worker serves no agent of that name."""

    @workflow.init
    def __init__(self, start: StartRun) -> None:
        agent = served(start.agent)
        self.start = start
        settings = start.settings
        state = start.state or _opening(agent.instructions, start.prompt)
        store = WorkflowStore()
        store.state = state
        log = ReplaySafeLog(get_logger())
        options = RunOptions(
            store=store,
            auto_approve=agent.options.auto_approve,
            workspace=agent.options.workspace,
            clock=workflow_clock,
            log=log,
        )
        config = dataclasses.replace(
            agent._loop,  # the agent's own loop configuration, with the workflow's ports
            model=ActivityModel(start.agent, agent.model.name, settings, _retry_of(agent.model)),
            options=options,
            deps=None,
            tool_runner=ActivityTools(start.agent, agent._loop.tools, settings),
        )
        ports = RunPorts(store=store, clock=workflow_clock, owner="workflow", lease_s=0, log=log)
        self.core = RunCore(state, ports)
        self.loop = LoopSteps(self.core, config)
        self.arrived: list[QueuedDecision] = []
        self.abort_request: AbortRequest | None = None
        self.retry_request: RetryRequest | None = None
        self.paused = False
        self._first_step = state.steps
        self.publisher = Publisher(start.agent, settings.search_attributes)

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        core, stepper = self.core, Boundaries(self)
        if start.state is None:
            await core.emit(
                RunStarted(**core.at(), machine="agent", model=self.loop.config.model.name)
            )
        else:
            await core.emit(RunResumed(**core.at(), state=core.state.state, recovered=()))
        while True:
            self.publisher.publish(core.state)
            await core.drive(stepper)
            self.publisher.publish(core.state)
            if stepper.ended():
                if self._finished():
                    return RunResult.of(core.state, tuple(core.events))
                await workflow.wait_condition(
                    lambda: self.retry_request is not None or self.abort_request is not None
                )
                await self._after_model_failed()
                continue
            if self.paused:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(start.evolve(prompt="", state=core.state))
            await workflow.wait_condition(
                lambda: bool(self.arrived) or self.abort_request is not None
            )

    def _finished(self) -> bool:
        """Ended for good (not resting in `model_failed`)."""
        return self.core.state.state in LOOP_FINAL

    async def _after_model_failed(self) -> None:
        """Leave `model_failed` as asked: abort the run, or call the model again."""
        loop, abort = self.loop, self.abort_request
        if abort is not None:
            loop.state = loop.state.evolve(stop_reason=f"aborted: {abort.reason}")
            loop.end("abort", Cause(abort.reason, abort.actor))
        else:
            request, self.retry_request = self.retry_request, None
            assert request is not None
            loop.state = loop.state.evolve(error=None, failure=None)
            loop.send(Cause("retry after a model error", request.actor), loop.machine.retry)
        await self.core.save()

    def pause_due(self) -> bool:
        """Continue as new at a step boundary: back in `thinking` (no call in flight), after
        `continue_after_steps` model steps here or when Temporal suggests it."""
        if self.loop.state.state != AgentLoop.thinking.id:
            return False
        steps = self.loop.state.steps - self._first_step
        limit = self.start.settings.continue_after_steps
        return steps >= limit or workflow.info().is_continue_as_new_suggested()

    # -- decisions ---------------------------------------------------------------------------

    @workflow.update(name="decide")
    def decide(self, request: DecideRequest) -> ApprovalRequest:
        """Queue a validated decision; it is applied at once if the run is waiting."""
        record = self._check(request)
        self.arrived.append(self._queued(request))
        return record.request()

    @decide.validator
    def _validate_decide(self, request: DecideRequest) -> None:
        self._check(request)

    @workflow.signal(name="decide")
    def decide_later(self, request: DecideRequest) -> None:
        """Fire and forget: checked when applied; a refused one is reported (`decision_refused`)."""
        try:
            self.arrived.append(self._queued(request))
        except DecisionError as exc:  # not even a decision: nothing to queue
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
        if self._finished() or self.abort_request is not None:
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

    def _check(self, request: DecideRequest) -> CallRecord:
        """The one checker a local run uses (`check_decision`), counting the decisions that
        arrived and wait for the next step boundary as queued."""
        arrived = {q.call_id for q in self.arrived}
        state, tools = self.core.state, self.loop.config.tools
        return check_decision(
            state, request.call_id, request.decision, tools=tools, queued=arrived
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
        return self.core.state.pending

    @workflow.query(name="events")
    def events(self) -> list[Event]:
        """The workflow run's events (since the run started, or continued as new)."""
        return list(self.core.events)


def _opening(instructions: str | None, prompt: str) -> RunState:
    """The run's opening state, as a local agent run opens it."""
    return opening_state(
        run_id=workflow.info().workflow_id,
        machine="agent",
        machine_version=AgentLoop.machine_version,
        messages=opening_messages(instructions, prompt),
        now=workflow_clock(),
    )


def _retry_of(model: object) -> ModelRetry | None:
    """The agent's own retry policy (`Agent(..., retry=...)`), for Temporal to apply."""
    return model.policy if isinstance(model, RetryingModel) else None
