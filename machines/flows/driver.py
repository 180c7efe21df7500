"""The flow driver: runs a phase's agent loop with `Runner`, folds the turn's results into the
data, and sends the flow machine `advance`; the machine's gates pick the next phase.

    phase loop ended → fold calls into data → advance(data, stop)
        a gate opens     → enter the next phase (saved with the transition)
        none opens       → wait for the user (`awaiting_input`), or fail if the phase never waits

A flow run's `state` is the phase's loop state (or `awaiting_input`); its `phase` is the flow
machine's state. Both live in one `RunState`, saved at every boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from statemachine import StateChart
from statemachine.exceptions import TransitionNotAllowed

from loopstate.engine.approval import Approver, Decision
from loopstate.engine.clock import Clock
from loopstate.engine.errors import DecisionError
from loopstate.engine.events import Event, RunFinished, RunSuspended, TransitionEvent
from loopstate.engine.hooks import HookChain
from loopstate.engine.messages import SystemMessage, UserMessage
from loopstate.engine.runner import AgentMachine, RunConfig, Runner
from loopstate.engine.state import RunState, Transition
from loopstate.engine.store import Store
from loopstate.machines.agent_loop import AgentLoop
from loopstate.machines.flows.machine import FINAL, FlowEvents, gate_of
from loopstate.machines.flows.phase import BoundPhase, last_error
from loopstate.machines.flows.prompt import phase_view
from loopstate.machines.flows.result import FlowDeps, FlowResult


@dataclass(frozen=True)
class FlowConfig:
    """Everything a flow run needs besides its state."""

    machine: type[StateChart[Any]]
    phases: Mapping[str, BoundPhase]
    store: Store
    clock: Clock
    lease_s: float
    approver: Approver | None = None
    auto_approve: bool = False
    hooks: HookChain | None = None
    workspace: Path | None = None
    deps: Any = None
    ask_again_after_crash: bool = False
    log: Any = None


def _loop(state: str) -> AgentMachine:
    machine: AgentMachine = AgentLoop(start_value=state)
    return machine


class FlowDriver:
    """Drives one flow run from its current phase until it ends or suspends."""

    def __init__(self, config: FlowConfig, state: RunState, *, owner: str) -> None:
        self.config = config
        self.state = state
        self.owner = owner
        self.machine = cast(FlowEvents, config.machine(start_value=state.phase))
        self.events: list[Event] = []
        self._unannounced: list[Transition] = []
        self._runner: Runner | None = None

    # -- resuming ----------------------------------------------------------------------------

    async def prepare(
        self, decisions: Mapping[str, Decision] | None, actor: str
    ) -> tuple[str, ...]:
        """Before driving a resumed loop: recover interrupted calls, apply queued and given
        decisions (all or none: `DecisionError` changes nothing). Returns recovered call ids."""
        runner = self._runner = Runner(self._run_config(self._phase()), self.state)
        recovered = runner.recover()
        inbox, runner.state = runner.state.inbox, runner.state.evolve(inbox=())
        for queued in inbox:
            await runner.apply_decisions({queued.call_id: queued.decision}, actor=queued.actor)
        if decisions:
            await runner.apply_decisions(decisions, actor=actor)
        return recovered

    def user_replied(self, message: str, *, actor: str) -> None:
        source = str(self.state.phase)
        self.machine.user_replied()
        messages = (*self.state.messages, UserMessage(content=message))
        self.state = self.state.evolve(messages=messages, state="idle")
        self._record(source, source, "user_replied", reason="the user answered", actor=actor)

    # -- the loop ----------------------------------------------------------------------------

    async def drive(self) -> FlowResult:
        try:
            while self.state.phase not in FINAL and await self._step():
                continue
            if self.state.phase not in FINAL:
                pending = tuple(p.call_id for p in self.state.pending)
                await self.emit(RunSuspended(**self.stamp(), pending=pending))
        except asyncio.CancelledError:
            await self.end("abort", reason="cancelled", actor="system")
            raise
        except DecisionError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            await self.end("fail", reason=error, actor="system", error=error)
        finally:
            await self.config.store.release(self.state.run_id, owner=self.owner)
        if self.state.phase in FINAL:
            s = self.state
            finished = RunFinished(
                **self.stamp(), status=s.status, stop_reason=s.stop_reason, error=s.error
            )
            await self.emit(finished)
        if self.config.hooks is not None:
            await self.config.hooks.on_run_end(self.state)
        return FlowResult.of(self.state, tuple(self.events))

    async def _step(self) -> bool:
        """One turn of the current phase and what follows it; False when the run suspends."""
        if self.state.state == "awaiting_input":
            return False
        bound = self._phase()
        if self.state.state not in FINAL:
            await self._turn(bound)
            if self.state.state == "awaiting_approval":
                return False
            if self.state.state in ("failed", "aborted"):
                event = "fail" if self.state.state == "failed" else "abort"
                await self.end(event, reason=self.state.error or self.state.stop_reason)
                return True
        missing = self._fold(bound)
        if missing is not None:
            await self.end("fail", reason=missing, actor="flow", error=missing)
            return True
        return await self._advance(bound)

    async def _turn(self, bound: BoundPhase) -> None:
        action = bound.spec.action
        if action is not None:
            data = action(dict(self.state.data))
            self.state = self.state.evolve(state="done", data=data, stop_reason="action")
            return
        runner, self._runner = self._runner, None
        if runner is None:
            if self.state.state == "idle":
                self._instruct(bound)
                await self._save()
            runner = Runner(self._run_config(bound), self.state)
        if runner.state.state not in FINAL:
            await runner.drive()
        self.state = runner.state
        self.events.extend(e for e in runner.events if e.kind != "run_finished")

    def _fold(self, bound: BoundPhase) -> str | None:
        """Fold the turn's successful calls into the data; the reason the phase failed when it
        owed a structured output and did not produce one."""
        state = self.state
        turn = state.calls[state.folded_calls :]
        data, produced = dict(state.data), False
        for call in turn:
            if call.status != "succeeded":
                continue
            arguments = call.executed_arguments or {}
            if bound.output is not None and call.tool == bound.output_tool:
                value = bound.output.model.model_validate(arguments).model_dump(mode="json")
                data[str(bound.output_key)], produced = value, True
            elif (update := bound.spec.updates.get(call.tool)) is not None:
                data = update(data, arguments)
        missing = None
        if bound.output is not None and not produced:
            title = bound.output.model.__name__
            error = last_error(state, str(bound.output_tool))
            missing = f"phase {bound.name!r} ended ({state.stop_reason}) without a valid {title}"
            missing += f"; last error: {error}" if error else ""
        self.state = state.evolve(data=data, folded_calls=len(state.calls))
        return missing

    async def _advance(self, bound: BoundPhase) -> bool:
        source = bound.name
        try:
            self.machine.advance(data=self.state.data, stop=self.state.stop_reason)
        except TransitionNotAllowed:
            if bound.spec.waits_for_user:
                self.state = self.state.evolve(state="awaiting_input")
                await self._save()
                return False
            error = (
                f"phase {source!r} ended ({self.state.stop_reason}) and none of its gates opened"
            )
            await self.end("fail", reason=error, actor="flow", error=error)
            return True
        target = str(self.machine.current_state_value)
        gate = gate_of(self.config.machine, source, target, "advance")
        self._record(source, target, "advance", reason=f"gate: {gate}", actor="flow")
        if target in FINAL:
            self.state = self.state.evolve(phase=target, state=target)
        else:
            spec = self.config.phases[target].spec
            data = spec.on_enter(dict(self.state.data)) if spec.on_enter else self.state.data
            self.state = self.state.evolve(
                phase=target, state="idle", data=data, phase_step=self.state.steps
            )
        await self._save()
        return True

    async def end(
        self, event: str, *, reason: str | None, actor: str = "system", error: str | None = None
    ) -> None:
        """End the flow in `failed` or `aborted` (`event` is fail or abort)."""
        if self.state.phase in FINAL:
            return
        source = str(self.state.phase)
        getattr(self.machine, event)()
        target = str(self.machine.current_state_value)
        stop = self.state.stop_reason if event == "fail" else f"aborted: {reason}"
        self.state = self.state.evolve(
            phase=target, state=target, error=error or self.state.error, stop_reason=stop
        )
        self._record(source, target, event, reason=reason, actor=actor)
        await self._save()

    # -- plumbing ----------------------------------------------------------------------------

    def _phase(self) -> BoundPhase:
        return self.config.phases[str(self.state.phase)]

    def _instruct(self, bound: BoundPhase) -> None:
        text = bound.instructions(self.state.data)
        system = [m for m in self.state.messages if m.role == "system"]
        if text and (not system or system[-1].content != text):
            message = SystemMessage(content=text)
            self.state = self.state.evolve(messages=(*self.state.messages, message))

    def _run_config(self, bound: BoundPhase) -> RunConfig:
        c = self.config
        assert bound.model is not None
        return RunConfig(
            model=bound.model,
            view=phase_view,
            machine=_loop,
            store=c.store,
            tools=bound.tools,
            approver=c.approver,
            auto_approve=c.auto_approve,
            max_steps=self.state.steps + bound.spec.max_steps,
            stop_when=bound.stop_when,
            tool_choice=bound.tool_choice,
            hooks=c.hooks,
            clock=c.clock,
            workspace=c.workspace,
            deps=FlowDeps(data=dict(self.state.data), user=c.deps),
            ask_again_after_crash=c.ask_again_after_crash,
            lease_s=c.lease_s,
            owner=self.owner,
            log=c.log,
        )

    def _record(
        self, source: str, target: str, event: str, *, reason: str | None, actor: str
    ) -> None:
        now = self.config.clock()
        seq = len(self.state.transitions) + 1
        transition = Transition(
            seq=seq, source=source, target=target, event=event, at=now, reason=reason, actor=actor
        )
        transitions = (*self.state.transitions, transition)
        self.state = self.state.evolve(transitions=transitions, updated_at=now)
        self._unannounced.append(transition)

    async def _save(self) -> None:
        state, now = self.state, self.config.clock()
        await self.config.store.save(
            state,
            owner=self.owner,
            now=now,
            ttl=self.config.lease_s,
        )
        announce, self._unannounced = self._unannounced, []
        for t in announce:
            fields = t.model_dump(exclude={"at"})
            await self.emit(TransitionEvent(**self.stamp(), **fields))
            if self.config.hooks is not None:
                await self.config.hooks.on_transition(t)

    async def emit(self, event: Event) -> None:
        self.events.append(event)
        if self.config.hooks is not None:
            await self.config.hooks.on_event(event)

    def stamp(self) -> dict[str, Any]:
        return {"run_id": self.state.run_id, "at": self.config.clock(), "step": self.state.steps}
