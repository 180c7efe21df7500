"""What defines a run's behaviour, as data: its `Definition` and the definition's fingerprint.

A run records, when it starts, the fingerprint of the definition it was started with
(`RunState.definition`); the store keeps each distinct definition once
(`Store.keep_definition`), and a resume compares the run's with the resuming agent's or
flow's (`loopstate.engine.compat`). What is recorded: the machine (states, transitions,
guards by name), each tool's name, JSON schema, gating and a hash of its description, a hash
of the instructions, the model's name, a flow's phases, and the agent's `version` label.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from typing import Any, Literal

from loopstate.engine.data import Frozen
from loopstate.engine.tool import Tool

DEFINITION_FORMAT = 1
"""The format of `Definition` itself (a later format reads this one's)."""

Gating = Literal["never", "always", "conditional"]


class ToolShape(Frozen):
    """One tool as a run's definition records it."""

    name: str
    parameters: dict[str, Any]
    gating: Gating = "never"
    description: str = ""
    """A hash of the description (it is long, and a change is judged by equality only)."""


class MachineShape(Frozen):
    """A machine's shape: its states and transitions, each `source -event[guards]-> target`."""

    name: str
    version: int = 1
    states: tuple[str, ...] = ()
    transitions: tuple[str, ...] = ()


class Definition(Frozen):
    """What a run was started with (see the module's doc); `fingerprint` names it."""

    format: int = DEFINITION_FORMAT
    kind: Literal["agent", "flow"] = "agent"
    version: str | None = None
    """The agent's or flow's human-readable label (`Agent(version="2025-11-refunds")`)."""
    machine: MachineShape
    tools: tuple[ToolShape, ...] = ()
    """A flow's are named `<phase>/<tool>`."""
    instructions: str | None = None
    """A hash of the instructions (None: none)."""
    model: str = ""
    phases: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        """A content hash of the definition: equal definitions, equal fingerprints."""
        return _digest(json.dumps(self.model_dump(mode="json"), sort_keys=True))

    def tool(self, name: str) -> ToolShape | None:
        return next((t for t in self.tools if t.name == name), None)

    def label(self) -> str:
        """How messages name it: its version label, else its fingerprint."""
        return self.version or self.fingerprint


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def text_hash(text: str | None) -> str | None:
    """The hash a definition keeps of a text (instructions, a description)."""
    return None if text is None else _digest(text)


@cache
def machine_shape(machine: Any) -> MachineShape:
    """The shape of a python-statemachine machine class (read once per class, from its
    public definition: states, their transitions' events, targets and guards)."""
    transitions = (
        f"{state.id} -{event}{_guards(t)}-> {target.id}"
        for state in machine.states
        for t in state.transitions
        for event in t.events
        for target in t.targets
    )
    return MachineShape(
        name=getattr(machine, "name", machine.__name__),
        version=getattr(machine, "machine_version", 1),
        states=tuple(s.id for s in machine.states),
        transitions=tuple(transitions),
    )


def _guards(transition: Any) -> str:
    guards = [str(spec) for spec in transition.cond]
    return f"[{' and '.join(guards)}]" if guards else ""


def tool_shape(tool: Tool, name: str | None = None) -> ToolShape:
    gating: Gating = "conditional" if callable(tool.needs_approval) else (
        "always" if tool.needs_approval else "never"
    )  # fmt: skip
    return ToolShape(
        name=name or tool.name,
        parameters=tool.definition.parameters,
        gating=gating,
        description=text_hash(tool.description) or "",
    )


def tool_shapes(tools: Iterable[Tool], prefix: str = "") -> tuple[ToolShape, ...]:
    return tuple(sorted((tool_shape(t, prefix + t.name) for t in tools), key=lambda s: s.name))
