"""What a run looked like at each transition, kept with the transition (`Transition.mark`), so
that a run can be forked at any transition without running its past again (`engine/fork.py`).

Messages and transitions only grow, so their counts place a transition in them; the calls of
a batch change as they are decided and run, so a mark keeps the batch's statuses as they were.
Transitions recorded before loopstate kept marks have none (see `fork.state_at`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from loopstate.engine.data import Frozen
from loopstate.engine.model import Usage

if TYPE_CHECKING:
    from loopstate.engine.state import RunState


class Mark(Frozen):
    """The run's shape when a transition was saved: counts, the batch's statuses, usage."""

    state: str | None = None
    """The run's `state` (its loop's state; None: the transition's target)."""
    messages: int
    calls: int
    batch_start: int
    statuses: tuple[str, ...] = ()
    """The statuses of `calls[batch_start:calls]` at the transition."""
    steps: int = 0
    usage: Usage = Usage()
    flow: dict[str, Any] | None = None
    """A flow run's position (`FlowPosition`, as JSON) at the transition."""


class ForkedFrom(Frozen):
    """Where a forked run came from (the source run and the transition it was forked at),
    who forked it and when, and what was changed at the fork point: the fork's first audit
    entry."""

    run_id: str
    seq: int
    by: str = "user"
    at: float = 0.0
    message: str | None = None
    """A user message appended at the fork point."""
    results: dict[str, str] = Field(default_factory=dict)
    """Tool results replaced, by call id."""
    replaced_message: tuple[int, str] | None = None
    """A user message replaced: its index in the history and its new text."""
    instructions: str | None = None
    """The forking agent's instructions, when they replaced the source's."""

    def edits(self) -> list[str]:
        """What was changed at the fork point, one line each."""
        lines = [f"result of call {c} replaced" for c in sorted(self.results)]
        if self.replaced_message is not None:
            lines.append(f"message {self.replaced_message[0]} replaced")
        if self.message is not None:
            lines.append("user message appended")
        if self.instructions is not None:
            lines.append("instructions replaced")
        return lines


def mark_of(state: RunState) -> Mark:
    """The mark of `state` as it is now: kept with its latest transition when it is saved, or
    when another transition follows it before a save."""
    return Mark.trusted(
        state=state.state,
        messages=len(state.messages),
        calls=len(state.calls),
        batch_start=state.batch_start,
        statuses=tuple(c.status for c in state.batch),
        steps=state.steps,
        usage=state.usage,
        flow=None if state.flow is None else state.flow.model_dump(mode="json"),
    )
