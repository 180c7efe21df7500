"""An agent phase's child run: named (`phase_run_id`) and saved by the flow before it starts,
started or continued through the one entry point sub-agents use (`run_child`), its output
read back typed.

    flow run ──phase agent──▶ child run (its own id, tools, audit trail)
        ▲                        │ done(output) │ suspended │ paused │ failed │ budget_exceeded
        └── data[key] / waits / rests / fails / rests at the budget ◀┘

A budget is the tree's (`Flow(budget=)`, counted over the flow's run and its child runs): a
phase's run that would pass it rests in `budget_exceeded`, and so does the flow; the flow
resumed with a raised budget (`resume(budget=)`) continues the phase's run with it. A phase's
run paused by its own id, or by a pause asked of the flow (which it reads at its next step
boundary: `LoopPause`), rests the flow in `paused` too, and the flow's resume continues it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from loopstate.engine.budget import still_over
from loopstate.engine.core import RunCore
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.failure import RunFailure
from loopstate.engine.hooks import child_observer
from loopstate.engine.options import RunOptions
from loopstate.engine.spending import tree_spent
from loopstate.engine.state import ParentLink
from loopstate.engine.store import Store
from loopstate.machines.agent.delegation import ChildRunner, ChildScope, run_child
from loopstate.machines.flows.phase import BoundPhase, last_error


@dataclass(frozen=True)
class PhaseOutcome:
    """How an agent phase's child run stands: its output (done), or why it failed."""

    kind: Literal["done", "suspended", "paused", "failed", "aborted", "over_budget"]
    value: Any = None
    why: str = ""
    actor: str = "system"
    """Who aborted the phase's run (aborted): a person's `Abort` in it aborts the flow; who
    paused it (paused): the flow rests in `paused` until its resume continues it."""
    failure: RunFailure | None = None
    """Which limit the phase's run stopped at (over_budget)."""


def phase_run_id(run_id: str, phase: str, children: tuple[str, ...]) -> str:
    """The next child run of `phase` in `run_id`, `<run>.<phase>.<n>` (n counts the phase's
    child runs from 1): readable, and different each time a gate sends the flow back."""
    prefix = f"{run_id}.{phase}."
    return f"{prefix}{sum(c.startswith(prefix) for c in children) + 1}"


async def run_phase_agent(
    core: RunCore,
    bound: BoundPhase,
    options: RunOptions,
    runner: ChildRunner | None = None,
    steps_left: int | None = None,
) -> PhaseOutcome:
    """Start or continue `bound`'s child run, named (`FlowPosition.child`) and saved by the
    flow before it starts, through `runner` (default: `run_child`, in this process);
    `steps_left`: the model calls the flow's cap leaves it (`Flow(max_steps=)`)."""
    assert bound.agent is not None
    assert core.state.flow is not None
    flow = core.state.flow
    assert flow.child is not None, "the flow names the phase's child run before it starts"
    scope = ChildScope(
        store=options.store,
        approver=options.approver,
        auto_approve=options.auto_approve,
        gates={},
        observer=child_observer(core.hooks, flow.child),
        budget=core.state.budget,
        rules=core.state.rules,
        steps_left=steps_left,
    )
    parent = ParentLink(run_id=core.state.run_id, phase=bound.name, name=bound.name)
    task = bound.task(flow.data)
    run = runner or run_child
    outcome = await run(bound.agent, task, run_id=flow.child, parent=parent, scope=scope)
    if outcome.kind == "suspended":
        return PhaseOutcome("suspended")
    if outcome.kind == "paused":
        why = f"its agent's run {outcome.run_id} was paused"
        return PhaseOutcome("paused", why=why, actor=outcome.actor)
    resting = outcome.kind in ("failed", "over_budget")  # (a child workflow's rest: failed)
    if resting and (at_budget := await _at_budget(options, outcome.run_id)) is not None:
        return at_budget
    if outcome.kind in ("failed", "aborted", "over_budget"):
        why = f"its agent's run {outcome.run_id} {outcome.output}"
        if outcome.kind == "aborted":
            return PhaseOutcome("aborted", why=why, actor=outcome.actor)
        return PhaseOutcome("failed", why=why)
    if bound.output is None:
        return PhaseOutcome("done", value=outcome.output)
    return await _typed(options, bound, outcome.run_id)


async def _at_budget(options: RunOptions, run_id: str) -> PhaseOutcome | None:
    """The phase's run resting at its budget (`budget_exceeded`), or None."""
    child = await options.store.load(run_id)
    if child.state != "budget_exceeded":
        return None
    return PhaseOutcome("over_budget", why=child.error or "", failure=child.failure)


async def raise_budget(core: RunCore, store: Store, actor: str) -> None:
    """Leave `budget_exceeded` for the agent phase's run once the flow's (raised) budget
    lets the step it stopped before start (it goes on with that budget); `RunNotResumable`
    saying which limit otherwise, with nothing changed."""
    state = core.state
    over = state.failure.budget if state.failure is not None else None
    if over is not None and state.budget is not None:
        still = still_over(state.budget, await tree_spent(store, state), over)
        if still is not None:
            raise RunNotResumable(f"run {state.run_id} is still over its budget: {still.message}")
    core.log.info("budget_raised", actor=actor)
    core.state = state.evolve(state="idle", error=None, failure=None)


async def _typed(options: RunOptions, bound: BoundPhase, run_id: str) -> PhaseOutcome:
    """The output the child submitted, validated; why not if it submitted none."""
    assert bound.output is not None
    assert bound.output_tool is not None
    child = await options.store.load(run_id)
    submitted = [c for c in child.calls if c.tool == bound.output_tool and c.status == "succeeded"]
    title = bound.output.model.__name__
    if not submitted:
        error = last_error(child, bound.output_tool)
        why = f"its agent's run {run_id} ended ({child.stop_reason}) without a valid {title}"
        return PhaseOutcome("failed", why=why + (f"; last error: {error}" if error else ""))
    try:
        value = bound.output.model.model_validate(submitted[-1].executed_arguments or {})
    except ValidationError as exc:  # an edit a person made that no longer fits
        return PhaseOutcome("failed", why=f"its agent's {title} does not validate: {exc}")
    return PhaseOutcome("done", value=value.model_dump(mode="json"))
