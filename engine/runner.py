"""The driver of the agent loop: it reads the machine's state, performs the one effect that
state asks for through a port, and reports the outcome to the machine as an event.

    idle              → start
    thinking          → one model call          → replied(calls, gated)
    awaiting_approval → the approver, or suspend → decided | abort
    executing_tool    → the batch, concurrently  → tools_done(stop)

Everything a later process needs is saved before the effect that depends on it: the reply
before any tool runs, each tool's intent before it runs and its result after.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopstate.engine.approval import Approver, Decision
from loopstate.engine.callids import with_run_ids
from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.errors import DecisionError, LoopstateError
from loopstate.engine.events import (
    ApprovalRequested,
    Event,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunResumed,
    RunStarted,
    RunSuspended,
    ToolApproval,
    ToolFinished,
    ToolStarted,
    TransitionEvent,
)
from loopstate.engine.executor import Executor, result_message
from loopstate.engine.failure import failure_of
from loopstate.engine.hooks import HookChain
from loopstate.engine.logs import get_logger
from loopstate.engine.messages import Message
from loopstate.engine.model import Model, ModelRequest, ToolChoice
from loopstate.engine.result import RunResult
from loopstate.engine.state import CallRecord, RunState, Transition
from loopstate.engine.store import DEFAULT_LEASE_S, Store
from loopstate.engine.tool import Tool, ToolContext

FINAL = frozenset({"done", "failed", "aborted"})
StopCondition = Callable[[RunState], bool | str | None]
"""Looked at after each batch of tool results: a truthy value ends the run in `done`
(a string is the stop reason; otherwise the function's name is)."""

_INFO_EVENTS = frozenset(
    {"run_started", "run_resumed", "run_suspended", "run_finished", "tool_approval"}
)


class AgentMachine(Protocol):
    """The events the runner sends (see `loopstate.machines.AgentLoop`)."""

    @property
    def current_state_value(self) -> Any: ...
    def start(self) -> Any: ...
    def replied(self, *, calls: int, gated: int) -> Any: ...
    def decided(self) -> Any: ...
    def tools_done(self, *, stop: str | None) -> Any: ...
    def abort(self) -> Any: ...
    def fail(self) -> Any: ...
    def reapprove(self) -> Any: ...


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs besides its state: ports, tools and policy."""

    model: Model
    machine: Callable[[str], AgentMachine]
    """Builds the machine positioned at a state value."""
    store: Store
    tools: Mapping[str, Tool] = field(default_factory=dict)
    approver: Approver | None = None
    auto_approve: bool = False
    max_steps: int = 25
    stop_when: tuple[StopCondition, ...] = ()
    tool_choice: ToolChoice = "auto"
    view: Callable[[tuple[Message, ...]], tuple[Message, ...]] | None = None
    """What the model is shown of the history (default: all of it). Hooks, recorders and the
    model all see the same request."""
    hooks: HookChain | None = None
    clock: Clock = system_clock
    workspace: Path | None = None
    deps: Any = None
    ask_again_after_crash: bool = False
    lease_s: float = DEFAULT_LEASE_S
    owner: str = "loopstate"
    log: Any = None


def _enabled(log: Any, level: int) -> bool:
    """Whether a line at `level` would be emitted (unknown logger kinds: assume so)."""
    check = getattr(log, "is_enabled_for", None)
    return True if check is None else bool(check(level))


class _Suspend:
    """Returned by a step that leaves the run waiting for decisions."""


SUSPEND = _Suspend()


class Runner:
    """Drives one run from its current state until it ends or suspends."""

    def __init__(self, config: RunConfig, state: RunState) -> None:
        self.config = config
        self.state = state
        self.machine = config.machine(state.state)
        self.executor = Executor(config.tools, auto_approve=config.auto_approve)
        self.hooks = config.hooks
        self.events: list[Event] = []
        base = config.log or get_logger()
        self.log = base.bind(run_id=state.run_id)
        self._log_debug = _enabled(self.log, logging.DEBUG)
        self._log_info = _enabled(self.log, logging.INFO)
        self._saved_messages = len(state.messages)
        self._saved_transitions = len(state.transitions)
        self._definitions = tuple(t.definition for t in config.tools.values())
        self._unannounced: list[Transition] = []
        self._unsaved_results = 0
        self._steps: dict[str, Callable[[], Awaitable[_Suspend | None]]] = {
            "idle": self._start,
            "thinking": self._think,
            "awaiting_approval": self._await_decisions,
            "executing_tool": self._execute,
        }

    # -- the loop ----------------------------------------------------------------------------

    async def drive(self) -> RunResult:
        try:
            while self.state.state not in FINAL:
                if await self._steps[self.state.state]() is SUSPEND:
                    await self._emit(RunSuspended(**self._at(), pending=self._pending_ids()))
                    break
        except asyncio.CancelledError:
            await self._end("abort", stop_reason="cancelled", actor="system")
            raise
        except DecisionError:
            raise  # a refused decision changes nothing; the caller hears why
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, LoopstateError):  # an expected failure: its message says it all
                self.log.error("run_failed", error=error.splitlines()[0])
            else:
                self.log.error("run_failed", exc_info=exc)
            self.state = self.state.evolve(failure=failure_of(exc))
            await self._end("fail", error=error, reason=error, actor="system")
        finally:
            await self.config.store.release(self.state.run_id, owner=self.config.owner)
        return await self._finish()

    async def _finish(self) -> RunResult:
        """Tell the world the run ended (or stopped for now) and return what it did."""
        if self.state.state in FINAL:
            await self._emit(
                RunFinished(
                    **self._at(),
                    status=self.state.status,
                    stop_reason=self.state.stop_reason,
                    error=self.state.error,
                )
            )
        if self.hooks is not None:
            await self.hooks.on_run_end(self.state)
        return RunResult.of(self.state, tuple(self.events))

    async def _start(self) -> None:
        self._fire("start")
        await self._save()

    async def _think(self) -> None:
        state = self.state
        # model_construct: the history is already-validated data; re-validating it every step
        # would make a step cost grow with the history.
        view = self.config.view
        request = ModelRequest.model_construct(
            messages=state.messages if view is None else view(state.messages),
            tools=self._definitions,
            tool_choice=self.config.tool_choice,
            step=state.steps + 1,
        )
        model = self.config.model
        await self._emit(
            ModelRequested(
                **self._at(step=request.step),
                model=model.name,
                messages=len(request.messages),
                tools=tuple(d.name for d in request.tools),
            )
        )
        if self.hooks is not None:
            await self.hooks.before_model(request)
        response = await model.complete(request)
        # Run-unique call ids before anything (hooks, records, events, store) sees the reply.
        response = with_run_ids(response, (c.call_id for c in state.calls), len(state.calls) + 1)
        if self.hooks is not None:
            await self.hooks.after_model(request, response)
        reply = response.message
        records = self.executor.prepare(reply.calls, self._context)
        update: dict[str, Any] = {
            "messages": (*state.messages, reply),
            "steps": request.step,
            "usage": state.usage + response.usage,
            "calls": (*state.calls, *records),
            "batch_start": len(state.calls),
        }
        if not records:
            update |= {"output": reply.content or "", "stop_reason": "answer"}
        self.state = state.evolve(**update)
        await self._emit(
            ModelResponded(
                **self._at(),
                model=response.model or model.name,
                tool_calls=tuple(c.name for c in reply.calls),
                usage=response.usage,
                text=reply.content,
                reasoning=reply.reasoning,
            )
        )
        for record in records:
            if record.decided_by == "auto_approve":
                await self._approval_event(record, "auto")
        gated = sum(r.status == "awaiting" for r in records)
        self._fire("replied", calls=len(records), gated=gated)
        self._mark_running()
        await self._save()

    async def _await_decisions(self) -> _Suspend | None:
        waiting = [c for c in self.state.batch if c.status == "awaiting"]
        approver = self.config.approver
        if waiting and approver is not None:
            requests = [c.request() for c in waiting]
            for r in requests:
                await self._emit(
                    ApprovalRequested(
                        **self._at(),
                        call_id=r.call_id,
                        tool=r.tool,
                        arguments=r.arguments,
                        reason=r.reason,
                    )
                )
            if self.hooks is not None:
                await self.hooks.on_approval_requested(requests)
            await self.apply_decisions(await approver(requests), actor="approver")
            if self.state.state in FINAL:
                return None
            waiting = [c for c in self.state.batch if c.status == "awaiting"]
        if waiting:
            await self._save()
            return SUSPEND
        self._fire("decided", actor=self._last_actor())
        self._mark_running()
        await self._save()
        return None

    def _mark_running(self) -> None:
        """Record the intent to run every approved call of the batch. It is saved with the
        transition into `executing_tool`, before any of them starts: from then on a crash is
        detectable, and `recover` decides what happens to a call that may have run."""
        if self.state.state != "executing_tool":
            return
        for record in self.state.batch:
            if record.status == "approved":
                self.state = self.state.replace_call(record.evolve(status="running"))

    async def _execute(self) -> None:
        if any(c.status == "approved" for c in self.state.batch):
            self._mark_running()  # entered by resume or re-approval: intent not yet saved
            await self._save()
        running = [c for c in self.state.batch if c.status == "running"]
        self._unsaved_results = len(running)
        if len(running) == 1:
            await self._run_call(running[0])
        elif running:
            async with asyncio.TaskGroup() as group:
                for record in running:
                    group.create_task(self._run_call(record))
        batch = self.state.batch
        stop = self._stop_reason()
        update: dict[str, Any] = {
            "messages": (*self.state.messages, *(result_message(c) for c in batch)),
            "calls": (
                *self.state.calls[: self.state.batch_start],
                *(c.evolve(result=None) for c in batch),
            ),
        }
        if stop is not None:
            update["stop_reason"] = stop
        self.state = self.state.evolve(**update)
        self._fire("tools_done", stop=stop, reason=stop)
        await self._save()

    async def _run_call(self, record: CallRecord) -> None:
        await self._emit(ToolStarted(**self._at(), call_id=record.call_id, tool=record.tool))
        if self.hooks is not None:
            await self.hooks.before_tool(record)
        started = time.perf_counter()
        finished = await self.executor.run(record, self._context(record.call_id, record.tool))
        if self.hooks is not None:
            replacement = await self.hooks.after_tool(finished, finished.result or "")
            if replacement is not None:
                finished = finished.evolve(result=replacement)
        self.state = self.state.replace_call(finished)
        self._unsaved_results -= 1
        if self._unsaved_results:  # the last result is saved with the batch's closing commit
            await self._save()
        await self._emit(
            ToolFinished(
                **self._at(),
                call_id=record.call_id,
                tool=record.tool,
                status=finished.status,
                elapsed_s=time.perf_counter() - started,
            )
        )

    # -- decisions, recovery, ending ---------------------------------------------------------

    async def apply_decisions(self, decisions: Mapping[str, Decision], *, actor: str) -> None:
        """Apply decisions to the current batch, all or none; an `Abort` ends the run."""
        batch = {c.call_id: c for c in self.state.batch}
        unknown = sorted(set(decisions) - set(batch))
        if unknown:
            raise DecisionError(
                f"run {self.state.run_id} has no call {', '.join(unknown)} to decide"
            )
        now = self.config.clock()
        decided = [
            self.executor.decide(batch[cid], d, actor=actor, at=now) for cid, d in decisions.items()
        ]
        for record in decided:
            self.state = self.state.replace_call(record)
            assert record.decision is not None
            await self._approval_event(record, record.decision.kind)
            if self.hooks is not None:
                await self.hooks.on_approval_decided(record)
        aborts = [r for r in decided if r.decision is not None and r.decision.kind == "abort"]
        if aborts:
            reason = getattr(aborts[0].decision, "reason", "aborted")
            await self._end("abort", stop_reason=f"aborted: {reason}", actor=actor, reason=reason)

    def recover(self) -> tuple[str, ...]:
        """After a crash: decide what happens to calls that were running when it died."""
        lost = [c for c in self.state.batch if c.status == "running"]
        for record in lost:
            self.state = self.state.replace_call(
                self.executor.recover(record, ask_again=self.config.ask_again_after_crash)
            )
        if self.state.state == "executing_tool" and self._pending_ids():
            self._fire("reapprove", reason="interrupted calls need a new decision", actor="system")
        return tuple(c.call_id for c in lost)

    async def abort(self, reason: str, *, actor: str) -> RunResult:
        try:
            await self._end("abort", stop_reason=f"aborted: {reason}", actor=actor, reason=reason)
        finally:
            await self.config.store.release(self.state.run_id, owner=self.config.owner)
        return await self._finish()

    async def _end(
        self,
        event: str,
        *,
        stop_reason: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> None:
        if self.state.state in FINAL:
            return
        self.state = self.state.evolve(stop_reason=stop_reason, error=error)
        self._fire(event, reason=reason or stop_reason, actor=actor)
        await self._save()

    async def announce(self, *, resumed: tuple[str, ...] | None = None) -> None:
        if resumed is None:
            event: Event = RunStarted(
                **self._at(), machine=self.state.machine, model=self.config.model.name
            )
        else:
            event = RunResumed(**self._at(), state=self.state.state, recovered=resumed)
        await self._emit(event)
        if self.hooks is not None:
            await self.hooks.on_run_start(self.state)

    # -- plumbing ----------------------------------------------------------------------------

    def _fire(
        self, event: str, *, reason: str | None = None, actor: str | None = None, **facts: Any
    ) -> None:
        source = self.state.state
        getattr(self.machine, event)(**facts)
        target = str(self.machine.current_state_value)
        now = self.config.clock()
        transition = Transition.model_construct(
            seq=len(self.state.transitions) + 1,
            source=source,
            target=target,
            event=event,
            at=now,
            reason=reason,
            actor=actor,
        )
        self.state = self.state.evolve(
            state=target, transitions=(*self.state.transitions, transition), updated_at=now
        )
        self._unannounced.append(transition)

    async def _save(self) -> None:
        state = self.state
        await self.config.store.save(
            state,
            first_message=self._saved_messages,
            first_transition=self._saved_transitions,
            owner=self.config.owner,
            now=self.config.clock(),
            ttl=self.config.lease_s,
        )
        self._saved_messages = len(state.messages)
        self._saved_transitions = len(state.transitions)
        announce, self._unannounced = self._unannounced, []
        for transition in announce:
            await self._emit(
                TransitionEvent(
                    **self._at(),
                    seq=transition.seq,
                    source=transition.source,
                    target=transition.target,
                    event=transition.event,
                    reason=transition.reason,
                    actor=transition.actor,
                )
            )
            if self.hooks is not None:
                await self.hooks.on_transition(transition)

    async def _emit(self, event: Event) -> None:
        self.events.append(event)
        info = event.kind in _INFO_EVENTS
        if self._log_info if info else self._log_debug:
            # structlog's first argument is named `event`: a transition's event logs as `trigger`.
            fields = {
                ("trigger" if k == "event" else k): v
                for k, v in event.__dict__.items()
                if k not in ("kind", "run_id")
            }
            (self.log.info if info else self.log.debug)(event.kind, **fields)
        if self.hooks is not None:
            await self.hooks.on_event(event)

    async def _approval_event(self, record: CallRecord, outcome: Any) -> None:
        await self._emit(
            ToolApproval(
                **self._at(),
                call_id=record.call_id,
                tool=record.tool,
                outcome=outcome,
                actor=record.decided_by or "policy",
                reason=getattr(record.decision, "reason", None) or record.reason or None,
            )
        )

    def _at(self, step: int | None = None) -> dict[str, Any]:
        return {
            "run_id": self.state.run_id,
            "at": self.config.clock(),
            "step": self.state.steps if step is None else step,
        }

    def _context(self, call_id: str, tool: str) -> ToolContext[Any]:
        return ToolContext(
            run_id=self.state.run_id,
            call_id=call_id,
            tool=tool,
            deps=self.config.deps,
            workspace=self.config.workspace,
            log=self.log.bind(call_id=call_id, tool=tool),
        )

    def _pending_ids(self) -> tuple[str, ...]:
        return tuple(c.call_id for c in self.state.batch if c.status == "awaiting")

    def _last_actor(self) -> str | None:
        actors = {c.decided_by for c in self.state.batch if c.decided_by}
        return ",".join(sorted(actors)) or None

    def _stop_reason(self) -> str | None:
        if self.state.steps >= self.config.max_steps:
            return "max_steps"
        for condition in self.config.stop_when:
            verdict = condition(self.state)
            if verdict:
                return (
                    verdict
                    if isinstance(verdict, str)
                    else getattr(condition, "__name__", "stop_when")
                )
        return None
