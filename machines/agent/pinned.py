"""An agent's side of run pinning (`loopstate.engine.pinning`): its `Definition` for a turn,
with its `version`, `on_change` and declared migrations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loopstate.engine.compat import ChangeKind, OnChange, Pin, on_change_policy
from loopstate.engine.definition import Definition, machine_shape, text_hash, tool_shapes
from loopstate.engine.errors import DefinitionError
from loopstate.engine.migration import Migration
from loopstate.engine.tool import Tool
from loopstate.machines.agent.loop import AgentLoop


@dataclass
class AgentPins:
    """What an agent pins its runs to, and how it takes a run pinned to something else."""

    instructions: str | None
    version: str | None = None
    on_change: Mapping[ChangeKind, OnChange] = field(default_factory=lambda: on_change_policy(None))
    migrations: tuple[Migration, ...] = ()
    _last: tuple[Mapping[str, Tool], str, Pin] | None = None

    @classmethod
    def of(
        cls,
        instructions: str | None,
        version: str | None,
        on_change: OnChange | Mapping[str, OnChange] | None,
        migrations: Sequence[Migration],
    ) -> AgentPins:
        wrong = [m for m in migrations if not isinstance(m, Migration)]
        if wrong:
            raise DefinitionError(
                f"migrations are Migration(from_=..., apply=...), not {wrong[0]!r}"
            )
        return cls(instructions, version, on_change_policy(on_change), tuple(migrations))

    def pin(self, tools: Mapping[str, Tool], model: str) -> Pin:
        """The pin for a turn with `tools` on `model` (the last one kept: tools change only
        when an agent's toolsets are listed)."""
        last = self._last
        if last is not None and last[0] is tools and last[1] == model:
            return last[2]
        definition = Definition(
            kind="agent",
            version=self.version,
            machine=machine_shape(AgentLoop),
            tools=tool_shapes(tools.values()),
            instructions=text_hash(self.instructions),
            model=model,
        )
        pin = Pin(
            definition=definition, tools=tools, policy=self.on_change, migrations=self.migrations
        )
        self._last = (tools, model, pin)
        return pin
