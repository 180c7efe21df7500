"""A flow's step cap (`Flow(max_steps=)`) over its whole tree of runs: the model calls of the
flow's own phases and those of its agent phases' child runs (and of their sub-agents) count
together, read from the store as a budget's are (`tree_spent`).

    flow run steps ─┐
    phase runs' ────┼─▶ total ≥ cap → the flow ends `failed`, stop reason `max_steps`,
    sub-agents' ────┘                 the error naming the cap, the phase and the counts

An agent phase's run is started (or continued) with what is left of the cap as its own step
limit (`ChildScope.steps_left`): it stops when the flow's cap is reached, and the flow ends
there. A sub-agent of a phase's run is not cut short: its model calls count, and the flow ends
at its next step once the total has reached the cap.
"""

from __future__ import annotations

from pydantic import Field

from loopstate.engine.data import Frozen
from loopstate.engine.spending import tree_spent
from loopstate.engine.state import RunState
from loopstate.engine.store import Store


class StepCount(Frozen):
    """A flow's model calls against its cap: its own phases' and its child runs'."""

    cap: int = Field(ge=1)
    own: int
    """Model calls of the flow's own phases (their loops run on the flow's run)."""
    below: int
    """Model calls of its agent phases' runs and every sub-agent below the flow."""

    @property
    def total(self) -> int:
        return self.own + self.below

    @property
    def left(self) -> int:
        return max(0, self.cap - self.total)

    @property
    def reached(self) -> bool:
        return self.total >= self.cap

    def message(self, phase: str) -> str:
        """Why the flow ended at its cap, with the counts."""
        return (
            f"the flow's max_steps ({self.cap}) reached in phase {phase!r}: {self.total} model "
            f"calls, {self.own} in the flow's own phases and {self.below} in its agent phases' "
            "runs"
        )


async def step_count(store: Store, state: RunState, cap: int) -> StepCount:
    """The model calls of the flow run `state` (as the caller holds it) and its tree."""
    total = (await tree_spent(store, state)).model_calls
    return StepCount(cap=cap, own=state.steps, below=total - state.steps)


async def cut_by_cap(store: Store, child_run_id: str, count: StepCount) -> bool:
    """Whether the child run `child_run_id` stopped because the flow's cap was reached (it
    stopped at its step limit, and the tree has made all the calls the cap allows)."""
    child = await store.load(child_run_id)
    return count.reached and child.stop_reason == "max_steps"
