"""A registry of tools grouped by category, from which a machine state picks its active set."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from loopstate.engine.errors import DefinitionError
from loopstate.engine.tool import Tool


class ToolRegistry:
    """Tools by unique name, selectable by name or category. Iteration keeps insertion order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise DefinitionError(f"{tool!r} is not a Tool: decorate it with @tool")
        if tool.name in self._tools:
            raise DefinitionError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def categories(self) -> frozenset[str]:
        return frozenset(t.category for t in self._tools.values())

    def category(self, *names: str) -> list[Tool]:
        """The tools in any of the given categories."""
        unknown = set(names) - self.categories
        if unknown:
            raise DefinitionError(f"no tools in categories {sorted(unknown)}")
        return [t for t in self._tools.values() if t.category in names]

    def select(self, *names: str) -> list[Tool]:
        """The named tools, in the order given."""
        missing = [n for n in names if n not in self._tools]
        if missing:
            raise DefinitionError(f"unknown tools {missing}")
        return [self._tools[n] for n in names]
