"""The agent loop's limits: its `Budget`, checked before each model call and each batch of
tools (`LoopLimits`), and the stop conditions looked at after a batch (`stop_reason`).

A call or batch that would start past a limit does not start: the run goes `over_budget` to
`budget_exceeded` (status `failed`, `failure.budget` says which limit and the counts) with
nothing in flight, and a resume with a raised budget goes `budget_raised` back to the step
it stopped before. For a run in a tree (sub-agents), the counts are the tree's; a sub-agent's
run that rests at the budget rests its parent too (`Delegations.stopped`), and the parent's
`budget_raised` goes back to `awaiting_approval`, where the child goes on with the raised budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopstate.engine.budget import Overrun, Spent, estimate_call, overrun, still_over
from loopstate.engine.core import Cause
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.failure import RunFailure
from loopstate.engine.model import ModelRequest
from loopstate.engine.spending import tree_spent
from loopstate.engine.state import RunState
from loopstate.engine.tree import delegated

if TYPE_CHECKING:
    from loopstate.machines.agent.steps import LoopConfig, LoopSteps

_STARTING = ("approved", "running")
"""The batch's calls that have not started in this process (`running`: intent saved)."""


class LoopLimits:
    """One loop's budget checks: they compute; the loop's `send` and the core's save commit."""

    def __init__(self, loop: LoopSteps) -> None:
        self.loop = loop

    async def before_call(self, request: ModelRequest) -> bool:
        """Stop before the model call `request` if it would pass the budget (True: stopped)."""
        over = await self._call_overrun(self.loop.state, request)
        if over is not None:
            await self.stop(over)
        return over is not None

    async def before_batch(self) -> bool:
        """Stop before the batch's calls start if they would pass the budget (True: stopped,
        the calls back to `approved`: their intent is withdrawn, none has started)."""
        if self.loop.state.budget is None:
            return False
        waiting = withdrawn(self.loop.state)
        over = await self._batch_overrun(waiting)
        if over is not None:
            self.loop.state = waiting
            await self.stop(over)
        return over is not None

    async def raised(self, *, actor: str) -> None:
        """Leave `budget_exceeded` for the step it stopped before, once the (raised) budget
        lets that step start; `RunNotResumable` saying which limit otherwise."""
        loop = self.loop
        state, config = loop.state, loop.config
        batch = has_batch(state)
        child = not batch and any(map(delegated, state.batch))
        if batch:
            over = await self._batch_overrun(withdrawn(state))
        elif child:  # a sub-agent's run rested at the budget: its step is checked again
            over = await self._child_overrun(state)
        else:
            request = loop.model_call.request(state, config.view, config.tool_choice)
            over = await self._call_overrun(state, request)
        if over is not None:
            raise RunNotResumable(f"run {state.run_id} is still over its budget: {over.message}")
        loop.state = loop.state.evolve(error=None, failure=None)
        loop.send(
            Cause("budget raised", actor), loop.machine.budget_raised, batch=batch, child=child
        )
        await loop.core.save()

    async def _call_overrun(self, state: RunState, request: ModelRequest) -> Overrun | None:
        if state.budget is None:
            return None
        spent = await tree_spent(self.loop.config.options.store, state)
        return overrun(state.budget, spent, call_adds(state, request), "model call")

    async def _child_overrun(self, state: RunState) -> Overrun | None:
        stopped = state.failure.budget if state.failure is not None else None
        if state.budget is None or stopped is None:
            return None
        return still_over(
            state.budget, await tree_spent(self.loop.config.options.store, state), stopped
        )

    async def _batch_overrun(self, state: RunState) -> Overrun | None:
        adds = batch_adds(state)
        if state.budget is None or adds is None:
            return None
        spent = await tree_spent(self.loop.config.options.store, state)
        return overrun(state.budget, spent, adds, "tool batch")

    async def stop(self, over: Overrun) -> None:
        """Rest in `budget_exceeded` at `over` (the loop's own limit, or a sub-agent's run
        that rested at the tree's budget while the batch waited for it)."""
        loop = self.loop
        error = f"BudgetExceeded: {over.message}"
        failure = RunFailure(error=error, budget=over)
        loop.state = loop.state.evolve(error=error, failure=failure)
        loop.core.log.warning("budget_exceeded", limit=over.limit, before=over.before)
        loop.send(Cause(over.message, "budget"), loop.machine.over_budget)
        await loop.core.save()


def call_adds(state: RunState, request: ModelRequest) -> Spent:
    """What the model call `request` of `state` is expected to add (`estimate_call`)."""
    estimate = estimate_call(len(request.model_dump_json()), state.last_call, state.usage)
    return Spent(tokens=estimate.tokens, cost_usd=estimate.cost_usd, model_calls=1)


def batch_adds(state: RunState) -> Spent | None:
    """What the batch's calls that wait to start add (None: none waits)."""
    starting = sum(c.status in _STARTING for c in state.batch)
    return Spent(tool_calls=starting) if starting else None


def withdrawn(state: RunState) -> RunState:
    """`state` with the batch's saved intents withdrawn (`running` → `approved`): at a step
    boundary no call of the batch has started in this process."""
    for call in state.batch:
        if call.status == "running":
            state = state.replace_call(call.evolve(status="approved"))
    return state


def has_batch(state: RunState) -> bool:
    """Whether the batch has calls that wait to start (`budget_raised`, `unpause`)."""
    return any(c.status in _STARTING for c in state.batch)


def stop_reason(state: RunState, config: LoopConfig) -> str | None:
    """Why the run stops after this batch: its step limit, or a `stop_when` condition."""
    if state.steps >= config.max_steps:
        return "max_steps"
    for condition in config.stop_when:
        verdict = condition(state)
        if verdict:
            return (
                verdict if isinstance(verdict, str) else getattr(condition, "__name__", "stop_when")
            )
    return None
