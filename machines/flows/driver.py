"""The flow's steps: run the current phase's agent loop (the same `LoopSteps` an `Agent` runs),
fold the turn's results into the data, and send the flow machine `advance`; its gates pick
the next phase.

    phase loop running → one loop step
    phase loop ended   → fold calls into data → advance(data, stop)
        a gate opens     → enter the next phase (saved with the transition)
        none opens       → wait for the user (`awaiting_input`), or fail if the phase never waits

A flow run's `state` is the phase's loop state; `flow` holds its phase and data. The flow
machine is stepped through its `TransitionTable`, as the agent loop is (one dispatcher). The
skeleton (`RunCore`) owns saving, events, the lease and the error policy for the whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, cast

from pydantic import BaseModel
from statemachine import StateChart
from statemachine.exceptions import TransitionNotAllowed

from loopstate.engine.core import Cause, Ending, OnCore, RunCore
from loopstate.engine.messages import SystemMessage, UserMessage
from loopstate.engine.options import RunOptions
from loopstate.engine.outside import outside_text
from loopstate.engine.state import FlowPosition
from loopstate.machines.agent.delegation import ChildRunner
from loopstate.machines.agent.loop import LOOP_FINAL, AgentLoop
from loopstate.machines.agent.steps import LoopConfig, LoopSteps, Recorded, ToolRunner
from loopstate.machines.flows.children import phase_run_id, run_phase_agent
from loopstate.machines.flows.machine import FINAL, FlowEvents, gate_of
from loopstate.machines.flows.phase import BoundPhase, last_error
from loopstate.machines.flows.prompt import phase_view
from loopstate.machines.flows.result import FlowDeps
from loopstate.machines.flows.step_cap import StepCount, cut_by_cap, step_count
from loopstate.machines.flows.typed import closed_gates, fit, misfit
from loopstate.machines.table import TransitionTable

P = ParamSpec("P")
_RESTING = (AgentLoop.model_failed.id, AgentLoop.budget_exceeded.id)
"""Phase loop states a resume leaves (a retry, a raised budget): the flow stops there too."""


@dataclass(frozen=True)
class FlowConfig:
    """Everything a flow run needs besides its state."""

    machine: type[StateChart[Any]]
    phases: Mapping[str, BoundPhase]
    options: RunOptions
    table: TransitionTable
    """The machine's transitions, stepped as the agent loop's are (`flow_table`)."""
    data: type[BaseModel] | None = None
    """The flow's data model (`Flow(data=...)`): the data fits it before any gate runs."""
    max_steps: int | None = None
    """The model calls the whole run may make, over all its phases (`Flow(max_steps=)`)."""
    tool_runners: Callable[[str], ToolRunner] | None = None
    """Where a phase's approved calls run, by phase (default: in this process)."""
    recorded: Callable[[str], Recorded | None] | None = None
    """Where a phase's calls were classified, by phase (Temporal: its model activity)."""
    child_runner: ChildRunner | None = None
    """How agent phases and sub-agents run their child runs (default: `run_child`)."""


class FlowSteps(OnCore):
    """Drives one flow run, one step at a time (a `Stepper` for `RunCore`)."""

    def __init__(self, core: RunCore, config: FlowConfig) -> None:
        self.core = core
        self.config = config
        self.machine = cast(FlowEvents, config.table.at(self.flow.phase))
        self._loop: LoopSteps | None = None
        self._count: StepCount | None = None
        """The flow's model calls over its tree against its cap (counted at each step)."""

    @property
    def flow(self) -> FlowPosition:
        assert self.core.state.flow is not None, "a flow run has a flow position"
        return self.core.state.flow

    @property
    def loop(self) -> LoopSteps:
        """The current phase's agent loop, on the same core."""
        if self._loop is None:
            self._loop = LoopSteps(self.core, self._loop_config(self._phase()))
        return self._loop

    # -- Stepper -----------------------------------------------------------------------------

    def ended(self) -> bool:
        return self.flow.phase in FINAL or self.state.state in _RESTING

    async def step(self) -> bool:
        if self.flow.awaiting_input:
            return False
        await self._recount()
        bound = self._phase()
        state = self.state
        if bound.agent is not None and state.state not in LOOP_FINAL:
            return await self._delegate(bound)
        if bound.spec.action is not None and state.state not in LOOP_FINAL:
            data = bound.spec.action(dict(self.flow.data))
            self._move(state="done", data=data, stop_reason="action")
        elif state.state == "idle" and not self._instructed(bound):
            self._instruct(bound)
            await self.core.save()
        elif state.state not in LOOP_FINAL:
            if state.state == AgentLoop.thinking.id and self._capped():
                return await self._stop_capped(bound)  # no model call past the flow's cap
            return await self.loop.step()
        elif state.state in ("failed", "aborted"):
            how: Ending = "fail" if state.state == "failed" else "abort"
            cause = Cause(state.error or state.stop_reason, "system")
            await self.core.end(self, how, cause, stop=state.stop_reason)
        else:
            return await self._advance(bound)
        return True

    def end(self, how: Ending, cause: Cause) -> None:
        if self.state.state not in LOOP_FINAL and self._phase().agent is None:
            self.loop.end(how, cause)
        event = self.machine.fail if how == "fail" else self.machine.abort
        self._send(cause, event)
        self._move(state=self.flow.phase, awaiting_input=False)

    def reset(self) -> None:
        self.machine = cast(FlowEvents, self.config.table.at(self.flow.phase))
        self._loop = None

    # -- the flow's own steps ----------------------------------------------------------------

    def user_replied(self, message: str, *, actor: str) -> None:
        """The user answered a phase waiting for them: its loop starts a new turn."""
        self._send(Cause("the user answered", actor), self.machine.user_replied)
        messages = (*self.state.messages, UserMessage(content=outside_text(message)))
        self.state = self.state.evolve(messages=messages, state="idle")
        self._move(awaiting_input=False, held=None)
        self._loop = None

    async def _delegate(self, bound: BoundPhase) -> bool:
        """An agent phase: start or continue its child run (its id saved first); its output
        lands in the data."""
        flow = self.flow
        if flow.child is None:
            if self._capped():  # no child run starts once the flow's cap is reached
                return await self._stop_capped(bound)
            child = phase_run_id(self.state.run_id, bound.name, flow.children)
            self._move(child=child, children=(*flow.children, child))
            await self.core.save()
        config, left = self.config, self._count.left if self._count else None
        outcome = await run_phase_agent(self.core, bound, config.options, config.child_runner, left)
        if await self._cut(self.flow.child):
            return await self._stop_capped(bound)
        if outcome.kind == "suspended":
            self._move(state="awaiting_approval")
            await self.core.save()
            return False
        if outcome.kind == "paused":  # the phase's run was paused: the flow rests too
            self.core.log.info("paused", phase=bound.name, child=self.flow.child)
            self._move(state="paused")
            await self.core.save()
            await self.config.options.store.drop_pause(self.state.run_id)  # (the child took it)
            return False
        if outcome.kind == "over_budget":  # the phase's run rests at the budget: so does the flow
            update = {"state": "budget_exceeded", "error": outcome.why, "failure": outcome.failure}
            self.state = self.state.evolve(**update)
            await self.core.save()
            return True
        if outcome.kind == "failed":
            error = f"phase {bound.name!r}: {outcome.why}"
            await self.core.end(self, "fail", Cause(error, "flow"), error=error)
            return True
        if outcome.kind == "aborted":  # a person aborted the phase's agent: the flow ends
            why = f"phase {bound.name!r}: {outcome.why}"
            await self.core.end(self, "abort", Cause(why, outcome.actor))
            return True
        data = {**self.flow.data, str(bound.output_key): outcome.value}
        self._move(state="done", stop_reason=f"agent {bound.name}", data=data, child=None)
        return True

    async def _advance(self, bound: BoundPhase) -> bool:
        missing = None if bound.agent is not None else self._fold(bound)
        if missing is None and self._capped() and self.state.stop_reason == "max_steps":
            return await self._stop_capped(bound)  # the cap cut the phase's turn short
        facts, missing = self._fitted(bound) if missing is None else (None, missing)
        if missing is not None:
            await self.core.end(self, "fail", Cause(missing, "flow"), error=missing)
            return True
        source = bound.name
        try:
            self.machine.advance(data=facts, stop=self.state.stop_reason)
        except TransitionNotAllowed:
            held = closed_gates(self.config.machine, source, facts)
            if bound.spec.waits_for_user:
                self._move(awaiting_input=True, held=held)
                await self.core.save()
                return False
            error = (
                f"phase {source!r} ended ({self.state.stop_reason}) and none of its gates opened"
            ) + (f": {held}" if held else "")
            await self.core.end(self, "fail", Cause(error, "flow"), error=error)
            return True
        target = str(self.machine.current_state_value)
        gate = gate_of(self.config.machine, source, target, "advance")
        self.core.record(source, target, "advance", Cause(f"gate: {gate}", "flow"))
        if target in FINAL:
            self._move(phase=target, state=target, held=None)
        else:
            spec = self.config.phases[target].spec
            data = spec.on_enter(dict(self.flow.data)) if spec.on_enter else self.flow.data
            self._move(
                phase=target, state="idle", data=data, phase_step=self.state.steps, held=None
            )
            self._loop = None
        await self.core.save()
        return True

    def _fitted(self, bound: BoundPhase) -> tuple[Any, str | None]:
        """The data as the gates see it (fitted to the flow's data model, if it has one, and
        stored so), or why it does not fit."""
        model, data = self.config.data, dict(self.flow.data)
        try:
            stored, facts = fit(model, data)
        except ValueError:  # pydantic's ValidationError is one
            assert model is not None
            why = misfit(model, data)
            return None, f"phase {bound.name!r}: the data does not fit {model.__name__}: {why}"
        self._move(data=stored)
        return facts, None

    def _fold(self, bound: BoundPhase) -> str | None:
        """Fold the turn's successful calls into the data; the reason the phase failed when it
        owed a structured output and did not produce one."""
        state, flow = self.state, self.flow
        data, produced = dict(flow.data), False
        for call in state.calls[flow.folded_calls :]:
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
        self._move(data=data, folded_calls=len(state.calls))
        return missing

    # -- plumbing ----------------------------------------------------------------------------

    def _send(
        self, cause: Cause | None, event: Callable[P, object], /, *a: P.args, **kw: P.kwargs
    ) -> str:
        target = self.core.send(self.machine, self.flow.phase, cause, event, *a, **kw)
        self._move(phase=target)
        return target

    def _move(
        self, *, state: str | None = None, stop_reason: str | None = None, **flow: Any
    ) -> None:
        update: dict[str, Any] = {"flow": self.flow.evolve(**flow)} if flow else {}
        if state is not None:
            update["state"] = state
        if stop_reason is not None:
            update["stop_reason"] = stop_reason
        self.state = self.state.evolve(**update)

    def _cap(self) -> int:
        """The flow run's own step limit: what its cap leaves after its child runs' calls."""
        if self._count is None:
            return self.state.steps + self._phase().spec.max_steps
        return self._count.cap - self._count.below

    async def _recount(self) -> None:
        cap = self.config.max_steps
        if cap is not None:
            self._count = await step_count(self.config.options.store, self.state, cap)

    async def _cut(self, child: str | None) -> bool:
        """Whether the phase's child run `child` stopped at the flow's cap (recounted)."""
        await self._recount()
        if self._count is None or child is None:
            return False
        return await cut_by_cap(self.config.options.store, child, self._count)

    async def _stop_capped(self, bound: BoundPhase) -> bool:
        """End the flow at its step cap (`Flow(max_steps=)`), naming where it stopped and the
        model calls counted over its tree."""
        await self._recount()
        assert self._count is not None, "only a flow with a cap stops at it"
        why = self._count.message(bound.name)
        self._move(stop_reason="max_steps", child=None)
        await self.core.end(self, "fail", Cause(why, "flow"), error=why)
        return True

    def _capped(self) -> bool:
        return self._count is not None and self._count.reached

    def _phase(self) -> BoundPhase:
        return self.config.phases[self.flow.phase]

    def _instructed(self, bound: BoundPhase) -> bool:
        text = bound.instructions(self.flow.data)
        system = [m for m in self.state.messages if m.role == "system"]
        return not text or (bool(system) and system[-1].content == text)

    def _instruct(self, bound: BoundPhase) -> None:
        message = SystemMessage(content=bound.instructions(self.flow.data))
        self.state = self.state.evolve(messages=(*self.state.messages, message))

    def _loop_config(self, bound: BoundPhase) -> LoopConfig:
        assert bound.model is not None
        options = self.config.options
        return LoopConfig(
            model=bound.model,
            options=options,
            tools=bound.tools,
            max_steps=min(self.state.steps + bound.spec.max_steps, self._cap()),
            stop_when=bound.stop_when,
            tool_choice=bound.tool_choice,
            view=phase_view,
            deps=FlowDeps(data=dict(self.flow.data), user=options.deps),
            tool_runner=self.config.tool_runners(bound.name) if self.config.tool_runners else None,
            recorded=self.config.recorded(bound.name) if self.config.recorded else None,
            child_runner=self.config.child_runner,
        )
