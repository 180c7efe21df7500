"""The agent loop's steps: for each state of `AgentLoop`, the one effect it asks for.

    idle              → start
    thinking          → one model call          → replied(calls, gated)
    awaiting_approval → the approver, or wait    → decided | abort
    executing_tool    → the batch, concurrently  → tools_done(stop)

Everything a later process needs is saved before the effect that depends on it: the reply
before any tool runs, each tool's intent before it runs and its result after. The skeleton
(`RunCore`) owns the state, saving, events, the lease and the error policy; decisions arrive
through `Decisions` (one path for approvers, `resume` and queued decisions).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.core import Cause, Ending, OnCore, RunCore
from loopstate.engine.errors import ModelError
from loopstate.engine.events import (
    ApprovalRequested,
    DecisionRefused,
    ModelResponded,
    ToolApproval,
    ToolFinished,
    ToolStarted,
)
from loopstate.engine.executor import Executor, result_message
from loopstate.engine.failure import failure_of
from loopstate.engine.messages import Message
from loopstate.engine.model import Model, ModelResponse, ToolChoice
from loopstate.engine.options import RunOptions, StopCondition
from loopstate.engine.sanitize import storable_text
from loopstate.engine.state import CallRecord
from loopstate.engine.tool import Tool, ToolContext
from loopstate.machines.agent.conversation import queued_message
from loopstate.machines.agent.decisions import Decided, Decisions, Refusal
from loopstate.machines.agent.delegation import ChildRunner, Delegations
from loopstate.machines.agent.limits import LoopLimits, stop_reason
from loopstate.machines.agent.loop import LOOP_STOPPED, AgentEvents, AgentLoop, agent_loop
from loopstate.machines.agent.model_call import ModelCall
from loopstate.machines.agent.pausing import LoopPause

P = ParamSpec("P")
HistoryView = Callable[[tuple[Message, ...]], tuple[Message, ...]]
"""What the model is shown of a history (e.g. `TokenBudget`)."""

Recorded = Callable[[ModelResponse], list[CallRecord] | None]
ToolRunner = Callable[[CallRecord, ToolContext[Any]], Awaitable[CallRecord]]
"""Runs one approved call and returns its record with the outcome; never raises but for
cancellation. The default is the executor's `run`, in this process; a Temporal workflow
runs each call as an activity instead (`loopstate.temporal`)."""


@dataclass(frozen=True)
class LoopConfig:
    """What one agent loop runs with: its model, tools and limits, and the run's options.
    A flow builds one per phase."""

    model: Model
    options: RunOptions
    tools: Mapping[str, Tool] = field(default_factory=dict)
    max_steps: int = 25
    stop_when: tuple[StopCondition, ...] = ()
    tool_choice: ToolChoice = "auto"
    view: HistoryView | None = None
    """What the model is shown of the history (default: all of it). Hooks, recorders and the
    model all see the same request."""
    deps: Any = None
    machine: Callable[[str], AgentEvents] = agent_loop
    """Builds the loop machine positioned at a state (an `AgentLoop` unless a test breaks one)."""
    tool_runner: ToolRunner | None = None
    child_runner: ChildRunner | None = None  # default `run_child`; Temporal: child workflows
    recorded: Recorded | None = None  # the calls classified where the model was (Temporal)


class LoopSteps(OnCore):
    """Drives the agent loop of one run, one step at a time (a `Stepper` for `RunCore`)."""

    def __init__(self, core: RunCore, config: LoopConfig) -> None:
        self.core = core
        self.config = config
        self.machine = config.machine(core.state.state)
        self.executor = Executor(
            config.tools,
            auto_approve=config.options.auto_approve,
            denial_message=config.options.denial_message,
            clock=config.options.clock, deadline=config.options.deadline,
        )  # fmt: skip
        self.decisions = Decisions(self.executor, config.tools, config.options.clock)
        self.delegations = Delegations(self)
        self.model_call = ModelCall(core, config.model, config.tools.values())
        self.limits, self.pausing = LoopLimits(self), LoopPause(self)
        self._unsaved_results = 0
        self.steps: dict[str, Callable[[], Awaitable[bool]]] = {
            AgentLoop.idle.id: self._start,
            AgentLoop.thinking.id: self._think,
            AgentLoop.awaiting_approval.id: self._await,
            AgentLoop.executing_tool.id: self._execute,
            AgentLoop.paused.id: self.pausing.rest,
        }

    # -- Stepper -----------------------------------------------------------------------------

    def ended(self) -> bool:
        return self.state.state in LOOP_STOPPED

    async def step(self) -> bool:
        if await self.pausing.due():  # asked from any process: stop here, nothing in flight
            return False
        return await self.steps[self.state.state]()

    def end(self, how: Ending, cause: Cause) -> None:
        self.send(cause, self.machine.fail if how == "fail" else self.machine.abort)

    def reset(self) -> None:
        self.machine = self.config.machine(self.state.state)

    def send(
        self, cause: Cause | None, event: Callable[P, object], /, *a: P.args, **kw: P.kwargs
    ) -> None:
        """Send one of the loop's typed events and record the transition."""
        target = self.core.send(self.machine, self.state.state, cause, event, *a, **kw)
        self.state = self.state.evolve(state=target)

    # -- the steps ---------------------------------------------------------------------------

    async def _start(self) -> bool:
        self.send(None, self.machine.start)
        await self.core.save()
        return True

    async def _think(self) -> bool:
        config = self.config
        request = self.model_call.request(self.state, config.view, config.tool_choice)
        if await self.limits.before_call(request):
            return True
        started = config.options.clock()
        try:
            response = await self.model_call.call(request)
        except ModelError as exc:
            if not (exc.retryable or (exc.fixable and config.options.rest_when_fixable)):
                raise  # the error policy ends the run in `failed`
            await self._stall(exc)
            return True
        reply = response.message
        records = config.recorded(response) if config.recorded is not None else None
        if records is None:
            records = self.executor.prepare(reply.calls, self.context, self.state.rules)
        state = self.state
        update: dict[str, Any] = {
            "messages": state.messages + (reply,),  # noqa: RUF005 (one copy, see core._marked)
            "steps": request.step,
            "usage": state.usage + response.usage,
            "last_call": response.usage,
            "driven_s": state.driven_s + (config.options.clock() - started),
            "calls": state.calls + tuple(records),
            "batch_start": len(state.calls),
        }
        if not records:
            update |= {"output": reply.content or "", "stop_reason": "answer"}
        self.state = state.evolve(**update)
        await self.core.emit(
            ModelResponded.trusted(
                **self.core.at(), model=response.model or self.config.model.name,
                tool_calls=tuple(c.name for c in reply.calls), usage=response.usage,
                text=reply.content, reasoning=reply.reasoning,
            )
        )  # fmt: skip
        for record in records:
            if record.decided_by == "auto_approve" or record.status == "denied":
                await self.announce(record, "auto" if record.status == "approved" else "deny")
        gated = sum(r.status == "awaiting" for r in records)
        self.send(None, self.machine.replied, calls=len(records), gated=gated)
        self.mark_running()
        await self.core.save()
        return True

    async def _stall(self, exc: ModelError) -> None:
        """Stop in `model_failed` after a model error that may pass, or pass once the set-up
        is fixed (an API key): `retry` goes on from this step, nothing before it run again."""
        error = f"{type(exc).__name__}: {exc}"
        self.core.log.error("run_failed", error=error.splitlines()[0], retryable=exc.retryable)
        self.state = self.state.evolve(error=error, failure=failure_of(exc))
        self.send(Cause(error, "system"), self.machine.model_error)
        await self.core.save()

    async def retry(self, *, actor: str) -> None:
        """Call the model again for the step that failed (`model_failed` → `thinking`)."""
        self.state = self.state.evolve(error=None, failure=None)
        self.send(Cause("retry after a model error", actor), self.machine.retry)
        await self.core.save()

    async def _await(self) -> bool:
        """Continue the child runs the batch waits for; decide what standing decisions cover;
        announce the calls that wait; ask the approver, if any; move on once every call is
        decided, or wait (False) for decisions from outside."""
        for finished in await self.delegations.resumed():
            self.state = self.state.replace_call(finished)
        if await self.delegations.stopped():  # a sub-agent's abort, or its rest at the budget
            return True
        if remembered := self.decisions.remembered(self.state):
            await self.decide(remembered, actor="remembered")
        # a call that waits for its sub-agent is announced in the sub-agent's run
        requests = [c.request() for c in self._waiting() if c.child_run_id is None]
        await self._announce_requests(requests)
        asked = [r for r in requests if not r.external]  # a result comes from outside
        approver = self.config.options.approver
        if asked and approver is not None:
            await self.decide(await approver(asked), actor="approver")
            if self.ended():
                return True
        if self._waiting():
            await self.core.save()
            return False
        actors = ",".join(sorted({c.decided_by for c in self.state.batch if c.decided_by}))
        event = self.machine.expired if "deadline" in actors else self.machine.decided
        self.send(Cause(actor=actors or None), event)
        self.mark_running()
        await self.core.save()
        return True

    def _waiting(self) -> list[CallRecord]:
        return [c for c in self.state.batch if c.status == "awaiting"]

    async def _announce_requests(self, requests: list[ApprovalRequest]) -> None:
        """Announced with their complete arguments whoever decides: an approver now, or
        someone after the run has suspended (a streamed run's reader sees what waits)."""
        core = self.core
        for r in requests:
            await core.emit(
                ApprovalRequested(
                    **core.at(), call_id=r.call_id, tool=r.tool, arguments=r.arguments,
                    reason=r.reason,
                )
            )  # fmt: skip
        if requests and core.hooks is not None:
            await core.hooks.on_approval_requested(requests)

    # -- decisions: computed by `Decisions`, committed here ---------------------------------

    async def decide(self, decisions: object, *, actor: str) -> None:
        """Apply decisions (by call id) to the batch, all or none: `DecisionError` changes
        nothing. An `Abort` ends the run."""
        await self.commit(self.decisions.apply(self.state, decisions, actor=actor))

    async def prepare(self, decisions: Mapping[str, Any] | None, actor: str) -> tuple[str, ...]:
        """Before a resumed loop is driven: recover, queued decisions, given decisions.
        Returns the recovered call ids."""
        ask_again = self.config.options.ask_again_after_crash
        self.state, recovered = self.decisions.recovered(self.state, ask_again=ask_again)
        if self.state.state == AgentLoop.executing_tool.id and self._waiting():
            cause = Cause("interrupted calls need a new decision", "system")
            self.send(cause, self.machine.reapprove)
        await self.commit(self.decisions.queued(self.state))
        if decisions and not self.ended():
            await self.decide(decisions, actor=actor)
        return recovered

    async def commit(self, decided: Decided) -> None:
        """Take the run `Decisions` computed; announce each decided call and each refused
        queued decision, in order; end the run if an `Abort` was among them."""
        core = self.core
        self.state = decided.state
        for item in decided.announced:
            if isinstance(item, Refusal):
                core.log.warning("decision_refused", call_id=item.call_id, error=item.reason)
                await core.emit(
                    DecisionRefused(
                        **core.at(), call_id=item.call_id, actor=item.actor, reason=item.reason
                    )
                )
                continue
            assert item.decision is not None
            await self.announce(item, item.decision.kind)
            if core.hooks is not None:
                await core.hooks.on_approval_decided(item)
        if decided.abort is not None:
            await core.end(self, "abort", decided.abort)

    async def announce(self, record: CallRecord, outcome: Any) -> None:
        core = self.core
        await core.emit(
            ToolApproval(
                **core.at(),
                call_id=record.call_id,
                tool=record.tool,
                outcome=outcome,
                actor=record.decided_by or "policy",
                reason=getattr(record.decision, "reason", None) or record.reason or None,
            )
        )

    def mark_running(self) -> None:
        """Record the intent to run every approved call of the batch. It is saved with the
        transition into `executing_tool`, before any of them starts: from then on a crash is
        detectable, and recovery decides what happens to a call that may have run."""
        if self.state.state != AgentLoop.executing_tool.id:
            return
        for record in self.state.batch:
            if record.status == "approved":
                self.state = self.state.replace_call(record.evolve(status="running"))

    async def _execute(self) -> bool:
        if await self.limits.before_batch():
            return True
        started = self.config.options.clock()
        if any(c.status == "approved" for c in self.state.batch):
            self.mark_running()  # entered by resume or re-approval: intent not yet saved
            await self.core.save()
        running = [c for c in self.state.batch if c.status == "running"]
        self._unsaved_results = len(running)
        if len(running) == 1:
            await self._run_call(running[0])
        elif running:
            async with asyncio.TaskGroup() as group:
                for record in running:
                    group.create_task(self._run_call(record))
        if await self.delegations.stopped():  # a sub-agent's abort, or its rest at the budget
            return True
        if any(c.status == "awaiting" for c in self.state.batch):  # a sub-agent waits
            self.send(Cause("a sub-agent waits for decisions", "system"), self.machine.reapprove)
            await self.core.save()
            return False
        batch = self.state.batch
        stop = stop_reason(self.state, self.config)
        direct = self.delegations.direct_output()
        update: dict[str, Any] = {
            "messages": self.state.messages
            + tuple(result_message(c) for c in batch)
            + queued_message(self.state),
            "queued_message": None,
            "driven_s": self.state.driven_s + (self.config.options.clock() - started),
            "calls": self.state.calls[: self.state.batch_start]
            + tuple(c.evolve(result=None, parameters=None) for c in batch),
        }
        if direct is not None:  # a sub-agent's answer is the run's (direct return)
            stop, update["output"] = "direct_return", direct
        if stop is not None:
            update["stop_reason"] = stop
        self.state = self.state.evolve(**update)
        self.send(Cause(stop) if stop else None, self.machine.tools_done, stop=stop)
        await self.core.save()
        return True

    async def _run_call(self, record: CallRecord) -> None:
        core, hooks = self.core, self.core.hooks
        await core.emit(ToolStarted.trusted(**core.at(), call_id=record.call_id, tool=record.tool))
        if hooks is not None:
            await hooks.before_tool(record)
        started = time.perf_counter()
        run = self.config.tool_runner or self.executor.run
        if self.delegations.tool(record.tool) is not None:
            run = self.delegations.run  # a sub-agent: its child run (`child_runner`)
            if record.child_run_id is None:  # its id is saved before the child starts
                record = self.delegations.named(record)
                self.state = self.state.replace_call(record)
                await core.save()
        finished = await run(record, self.context(record.call_id, record.tool))
        if hooks is not None:
            replacement = await hooks.after_tool(finished, finished.result or "")
            if replacement is not None:
                finished = finished.evolve(result=storable_text(replacement))
        self.state = self.state.replace_call(finished)
        self._unsaved_results -= 1
        if self._unsaved_results:  # the last result is saved with the batch's closing commit
            await core.save()
        await core.emit(
            ToolFinished.trusted(
                **core.at(),
                call_id=record.call_id,
                tool=record.tool,
                status=finished.status,
                elapsed_s=time.perf_counter() - started,
            )
        )

    # -- plumbing ----------------------------------------------------------------------------

    def context(self, call_id: str, tool: str) -> ToolContext[Any]:
        options = self.config.options
        return ToolContext(
            run_id=self.state.run_id,
            call_id=call_id,
            tool=tool,
            deps=self.config.deps,
            workspace=options.workspace,
            log=self.core.log.bind(call_id=call_id, tool=tool),
        )
