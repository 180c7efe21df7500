"""What a flow run returns, and what a flow's tools receive as their `deps`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from loopstate.engine.events import Event
from loopstate.engine.result import RunResult
from loopstate.engine.state import RunState


class FlowResult(RunResult):
    """A `RunResult` with the flow's phase and data. `status == "awaiting_input"`: the phase
    waits for the user's next message (`output` is what the model last said to them)."""

    phase: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    held: str | None = None
    """Why the phase did not advance, when a gate stayed shut for an absent field (`@reads`)."""

    @classmethod
    def of(cls, state: RunState, events: tuple[Event, ...] = ()) -> FlowResult:
        base = RunResult.of(state, events)
        flow = state.flow
        return cls(
            **dict(base),
            phase=state.phase,
            data=flow.data if flow else {},
            held=flow.held if flow else None,
        )


@dataclass(frozen=True)
class FlowDeps:
    """A flow tool's `ctx.deps`: the data as it was when the phase's turn began, and the
    dependencies given to the flow."""

    data: Mapping[str, Any]
    user: Any = None
