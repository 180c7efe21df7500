"""Whether a stored run can go on under the definition that resumes it: the changes between the
run's `Definition` and the resuming one, classified.

    compatible    a tool added or removed that no call used, a description reworded, a model
                  or version changed, the machine changed around the run's state, a schema
                  that still accepts every call's arguments, a gate changed where no call
                  waits on it: each allowed or refused by the agent's `on_change` (by kind)
    incompatible  a tool the run's unfinished or past calls need is gone, or its schema no
                  longer accepts their arguments; a waiting call's tool now has another schema
                  than the one it was asked under; the state the run is in no longer exists;
                  the gate of a tool a call waits on removed

A run without a recorded definition (started before runs recorded one) is judged on what it
holds: its unfinished calls' tools are there with the schemas they were asked under, its
state exists, and its instructions are the resuming agent's (`on_change` for "instructions").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, get_args

from pydantic import ValidationError

from loopstate.engine.data import Frozen
from loopstate.engine.definition import Definition, ToolShape, text_hash
from loopstate.engine.errors import DefinitionError
from loopstate.engine.messages import SystemMessage
from loopstate.engine.migration import Migration
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.tool import Tool

ChangeKind = Literal[
    "version", "model", "instructions", "machine", "phases",
    "tool_added", "tool_removed", "tool_description", "tool_schema", "tool_gate",
]  # fmt: skip
OnChange = Literal["allow", "refuse"]
CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)
DEFAULT_ON_CHANGE: Mapping[ChangeKind, OnChange] = {
    **dict.fromkeys(CHANGE_KINDS, "allow"),
    "instructions": "refuse",  # as before definitions were recorded: other instructions refuse
}
UNFINISHED = ("awaiting", "approved", "running", "interrupted")
"""Call statuses whose tool still has to run (or be decided) when the run resumes."""


class Change(Frozen):
    """One difference between a run's definition and the resuming one, in one line."""

    kind: ChangeKind
    text: str
    breaking: bool = False
    """Incompatible whatever `on_change` says."""


def on_change_policy(value: OnChange | Mapping[str, OnChange] | None) -> dict[ChangeKind, OnChange]:
    """`on_change` as given to an agent or a flow: one answer for every kind, or answers by
    kind over the defaults (`DEFAULT_ON_CHANGE`)."""
    if value is None:
        return dict(DEFAULT_ON_CHANGE)
    if isinstance(value, str):
        return _checked_answer(dict.fromkeys(CHANGE_KINDS, value))
    unknown = sorted(set(value) - set(CHANGE_KINDS))
    if unknown:
        raise DefinitionError(
            f"on_change has unknown kinds {unknown}; the kinds are {', '.join(CHANGE_KINDS)}"
        )
    return _checked_answer({**DEFAULT_ON_CHANGE, **value})  # type: ignore[dict-item]


def _checked_answer(policy: dict[ChangeKind, str]) -> dict[ChangeKind, OnChange]:
    wrong = sorted({v for v in policy.values() if v not in ("allow", "refuse")})
    if wrong:
        raise DefinitionError(f"on_change answers are 'allow' or 'refuse', not {wrong}")
    return policy  # type: ignore[return-value]


@dataclass(frozen=True)
class Pin:
    """What a resuming agent or flow brings to the check: its definition, the tools the
    run's calls are judged against (a flow's: its current phase's), how the definition names
    them (`scope`: `<phase>/` in a flow), how messages name it, its `on_change` and its
    declared migrations."""

    definition: Definition
    tools: Mapping[str, Tool]
    scope: str = ""
    who: str = "this agent"
    policy: Mapping[ChangeKind, OnChange] = field(default_factory=lambda: dict(DEFAULT_ON_CHANGE))
    migrations: tuple[Migration, ...] = ()

    @cached_property
    def fingerprint(self) -> str:
        """The definition's (hashed once per pin: a pin is kept while its tools are)."""
        return self.definition.fingerprint


def changes(state: RunState, before: Definition | None, pin: Pin) -> tuple[Change, ...]:
    """Every difference that matters to `state` between `before` (None: unknown) and `pin`."""
    found = [*_fit(state, pin), *_instructions_kept(state, pin)]
    if before is not None:
        found.extend(_header(before, pin.definition))
        found.extend(_tools(state, before, pin))
    return tuple(found)


def refusals(found: tuple[Change, ...], policy: Mapping[ChangeKind, OnChange]) -> tuple[str, ...]:
    """The lines of the changes that refuse the resume: breaking, or refused by `policy`."""
    return tuple(
        c.text if c.breaking else f"{c.text} (on_change refuses {c.kind})"
        for c in found
        if c.breaking or policy.get(c.kind, "allow") == "refuse"
    )


def _fit(state: RunState, pin: Pin) -> Iterator[Change]:
    """What the run needs now, whatever it was started with."""
    position = state.phase if state.flow is not None else state.state
    if pin.definition.machine.states and position not in pin.definition.machine.states:
        machine = pin.definition.machine.name
        yield Change(
            kind="machine",
            text=f"the run is in state {position!r}, which {machine} no longer has",
            breaking=True,
        )
    needed = {c.tool for c in state.batch if c.status in UNFINISHED}
    missing = sorted(needed - set(pin.tools))
    if missing:
        yield Change(
            kind="tool_removed",
            text=f"run {state.run_id} needs the tools {', '.join(sorted(needed))} for its "
            f"pending calls and {pin.who} lacks {', '.join(missing)}",
            breaking=True,
        )
    changed = sorted(
        c.tool
        for c in state.batch
        if c.status == "awaiting"
        and c.parameters is not None
        and c.tool in pin.tools
        and pin.tools[c.tool].definition.parameters != c.parameters
    )
    if changed:
        yield Change(
            kind="tool_schema",
            text=f"run {state.run_id} has calls of {', '.join(changed)} waiting under another "
            "schema than the tool has now (decide them with the tool they were asked for)",
            breaking=True,
        )


def _instructions_kept(state: RunState, pin: Pin) -> Iterator[Change]:
    """The run's first system message against the instructions (an agent without
    instructions fits any run: its prompt may have brought its own)."""
    now = pin.definition.instructions
    if now is None or state.flow is not None:
        return
    first = state.messages[0] if state.messages else None
    stored = first.content if isinstance(first, SystemMessage) else None
    if text_hash(stored) != now:
        yield Change(
            kind="instructions",
            text=f"run {state.run_id} started with other instructions ({_quote(stored)}) "
            f"than {pin.who}'s",
        )


def _header(before: Definition, now: Definition) -> Iterator[Change]:
    if before.version != now.version:
        yield Change(kind="version", text=f"version {before.version} → {now.version}")
    if before.model != now.model:
        yield Change(kind="model", text=f"model {before.model} → {now.model}")
    if before.machine != now.machine:
        gone = sorted(set(before.machine.states) - set(now.machine.states))
        new = sorted(set(now.machine.states) - set(before.machine.states))
        yield Change(
            kind="machine",
            text=f"machine {now.machine.name} changed (states gone: {', '.join(gone) or 'none'};"
            f" new: {', '.join(new) or 'none'}; transitions or guards may differ)",
        )
    if before.phases != now.phases:
        yield Change(
            kind="phases", text=f"phases {', '.join(before.phases)} → {', '.join(now.phases)}"
        )


def _tools(state: RunState, before: Definition, pin: Pin) -> Iterator[Change]:
    now, scope = pin.definition, pin.scope
    calls = state.batch if state.flow is not None else state.calls  # a flow's: this phase's
    used: dict[str, list[CallRecord]] = {}
    for c in calls:
        used.setdefault(scope + c.tool, []).append(c)
    unfinished = {scope + c.tool for c in state.batch if c.status in UNFINISHED}
    old = {t.name: t for t in before.tools}
    new = {t.name: t for t in now.tools}
    for name in sorted(old.keys() - new.keys()):
        if name in unfinished:
            continue  # `_fit` said it
        ids = ", ".join(c.call_id for c in used.get(name, ()))
        yield Change(
            kind="tool_removed",
            text=f"tool {name} is gone" + (f" and past calls {ids} used it" if ids else ""),
            breaking=bool(ids),
        )
    for name in sorted(new.keys() - old.keys()):
        yield Change(kind="tool_added", text=f"tool {name} added")
    for name in sorted(old.keys() & new.keys()):
        yield from _tool_changed(state, old[name], new[name], used.get(name, []), pin)


def _tool_changed(
    state: RunState, old: ToolShape, new: ToolShape, calls: list[CallRecord], pin: Pin
) -> Iterator[Change]:
    name = new.name
    if old.description != new.description:
        yield Change(kind="tool_description", text=f"tool {name}'s description changed")
    if old.parameters != new.parameters:
        tool = pin.tools.get(name.removeprefix(pin.scope))
        refused = [c.call_id for c in calls if tool is not None and not _accepts(tool, c)]
        text = f"tool {name}'s schema changed"
        if refused:
            text += f" and no longer accepts the arguments of calls {', '.join(refused)}"
        yield Change(kind="tool_schema", text=text, breaking=bool(refused))
    if old.gating != new.gating:
        waiting = [c.call_id for c in calls if c.status == "awaiting" and not c.external]
        ungated = new.gating == "never" and bool(waiting)
        text = f"tool {name}'s gate {old.gating} → {new.gating}"
        if ungated:
            text += f" while calls {', '.join(waiting)} wait on it"
        yield Change(kind="tool_gate", text=text, breaking=ungated)


def _accepts(tool: Tool, call: CallRecord) -> bool:
    arguments = call.executed_arguments
    if arguments is None:  # it never validated: nothing ran, nothing to keep
        return True
    try:
        tool.validate(dict(arguments))
    except (ValidationError, ValueError, TypeError):
        return False
    return True


def _quote(text: str | None, limit: int = 40) -> str:
    if not text:
        return "none"
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
