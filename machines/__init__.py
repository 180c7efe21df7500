"""State machines: the agent loop, flows, and the shipped example flows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

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
        import importlib

        module, attr = self._paths[name]
        machine: type = getattr(importlib.import_module(module), attr)
        return machine

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


SHIPPED: Mapping[str, type] = _Shipped()


def __getattr__(name: str) -> Any:
    if name == "CoachingFlow":
        return SHIPPED["coaching"]
    raise AttributeError(name)


__all__ = ["SHIPPED", "AgentLoop", "CoachingFlow"]
