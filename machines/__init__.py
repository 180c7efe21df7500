"""State machines: the agent loop, flows, and the shipped example flows."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from loopstate.engine.errors import DefinitionError
from loopstate.machines.agent.loop import AgentLoop


class _Shipped(Mapping[str, type]):
    """Every machine loopstate ships, by the name the CLI and the diagrams use. The example
    flows load on first use, so `import loopstate` does not pay for them."""

    _paths: ClassVar[dict[str, tuple[str, str]]] = {
        "agent": ("loopstate.machines.agent.loop", "AgentLoop"),
        "coaching": ("loopstate.machines.coaching", "CoachingFlow"),
        "gauntlet": ("loopstate.machines.gauntlet", "Gauntlet"),
    }

    def __getitem__(self, name: str) -> type:
        module, attr = self._paths[name]
        machine: type = getattr(importlib.import_module(module), attr)
        return machine

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


SHIPPED: Mapping[str, type] = _Shipped()


def machine_class(target: str) -> Any:
    """A shipped machine by name (`agent`, `coaching`, ...) or any as `module:Class`
    (`DefinitionError` if there is none): what the CLI and the service draw."""
    if target in SHIPPED:
        return SHIPPED[target]
    module_name, _, attr = target.partition(":")
    if not attr:
        known = ", ".join(sorted(SHIPPED))
        raise DefinitionError(
            f"no shipped machine {target!r} (known: {known}); or use module:Class"
        )
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise DefinitionError(f"cannot load {target}: {exc}") from None


def __getattr__(name: str) -> Any:
    if name == "CoachingFlow":
        return SHIPPED["coaching"]
    raise AttributeError(name)


__all__ = ["SHIPPED", "AgentLoop", "CoachingFlow", "machine_class"]
