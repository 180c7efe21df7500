"""A flow's side of run pinning (`loopstate.engine.pinning`): its `Definition` (the flow
machine, its phases, each phase's tools named `<phase>/<tool>`, the phases' models) and the
pin a run is checked against at resume (its current phase's tools)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopstate.engine.compat import OnChange, Pin, on_change_policy
from loopstate.engine.definition import Definition, machine_shape, tool_shapes
from loopstate.engine.migration import Migration
from loopstate.engine.state import RunState
from loopstate.machines.flows.phase import BoundPhase


class FlowPins:
    """What a flow pins its runs to (one definition per flow: its phases are fixed)."""

    def __init__(
        self,
        name: str,
        machine: Any,
        phases: Mapping[str, BoundPhase],
        version: str | None = None,
        on_change: OnChange | Mapping[str, OnChange] | None = None,
        migrations: Sequence[Migration] = (),
    ) -> None:
        self.name = name
        self.phases = phases
        self.policy = on_change_policy(on_change)
        self.migrations = tuple(migrations)
        models = dict.fromkeys(p.model.name for p in phases.values() if p.model is not None)
        self.definition = Definition(
            kind="flow",
            version=version,
            machine=machine_shape(machine),
            tools=tuple(
                s for n, p in phases.items() for s in tool_shapes(p.tools.values(), f"{n}/")
            ),
            model=",".join(models),
            phases=tuple(phases),
        )

    def pin(self, state: RunState) -> Pin:
        phase = self.phases.get(state.phase or "")
        return Pin(
            definition=self.definition,
            tools=phase.tools if phase is not None else {},
            scope=f"{state.phase}/",
            who=f"phase {state.phase} of flow {self.name}",
            policy=self.policy,
            migrations=self.migrations,
        )
