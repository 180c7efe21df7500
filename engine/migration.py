"""Declared migrations: how a run started under an older definition is mapped to the new one.

`Agent(migrations=[Migration(from_="2025-10", apply=rename_refund)])`: a run whose definition
has that fingerprint or version label is passed to `apply` at resume (`fn(run) -> run`), and
the run it returns is checked against the resuming definition like any other. A migration
may change the run's state, its calls and their arguments, never its history (messages and
transitions are append-only). A waiting call it changes (another tool, other arguments) is
bound anew: its arguments validated by the new tool, its digest derived again, and a
decision queued for the old form dropped, so the person decides what will actually run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from loopstate.engine.approval import arguments_digest
from loopstate.engine.definition import Definition
from loopstate.engine.errors import DefinitionError
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.tool import Tool


@dataclass(frozen=True)
class Migration:
    """Maps runs started under the definition `from_` (a fingerprint or a version label)
    to the agent's current one: `apply(run) -> run` (a pure function of the `RunState`)."""

    from_: str
    apply: Callable[[RunState], RunState]
    name: str = field(default="")

    def __post_init__(self) -> None:
        if not self.from_:
            raise DefinitionError("Migration(from_=...) names a fingerprint or a version label")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.apply, "__name__", "migration"))

    def fits(self, before: Definition | None) -> bool:
        return before is not None and self.from_ in (before.fingerprint, before.version)


def migration_for(migrations: Sequence[Migration], before: Definition | None) -> Migration | None:
    """The first of `migrations` declared for the run's definition `before`."""
    return next((m for m in migrations if m.fits(before)), None)


class MigrationRefused(Exception):
    """A migration returned what cannot be a run of this definition (the reason, one line)."""


@dataclass(frozen=True)
class Migrated:
    """A migrated run and what its migration changed: the waiting calls bound anew and the
    queued decisions dropped because they were for a call's old form."""

    state: RunState
    rebound: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()


def migrate(state: RunState, migration: Migration, tools: Mapping[str, Tool]) -> Migrated:
    """`state` passed through `migration`, its changed waiting calls bound anew; raises
    `MigrationRefused` for an invalid result (the run is then left as it was)."""
    try:
        out = migration.apply(state)
        if not isinstance(out, RunState):
            raise MigrationRefused(f"it returned {type(out).__name__}, not a RunState")
        out = RunState.model_validate(out.model_dump())
    except MigrationRefused:
        raise
    except Exception as exc:  # a user's function: whatever it raises refuses the migration
        raise MigrationRefused(f"it raised {type(exc).__name__}: {exc}") from None
    _check_kept(state, out)
    before = {c.call_id: c for c in state.batch}
    rebound = tuple(
        c.call_id
        for c in out.batch
        if c.status == "awaiting" and c.call_id in before and _form(c) != _form(before[c.call_id])
    )
    out = _rebind(out, rebound, tools)
    dropped = tuple(q.call_id for q in out.inbox if q.call_id in rebound)
    out = out.evolve(inbox=tuple(q for q in out.inbox if q.call_id not in rebound))
    return Migrated(state=out, rebound=rebound, dropped=dropped)


def _check_kept(state: RunState, out: RunState) -> None:
    if out.run_id != state.run_id:
        raise MigrationRefused(f"it changed the run's id to {out.run_id!r}")
    if out.messages != state.messages or out.transitions != state.transitions:
        raise MigrationRefused("it changed the run's history (messages and transitions stay)")
    if out.definition != state.definition:
        raise MigrationRefused("it changed the run's definition (the resume records the new one)")


def _form(call: CallRecord) -> tuple[str, object]:
    return call.tool, call.arguments


def _rebind(state: RunState, call_ids: tuple[str, ...], tools: Mapping[str, Tool]) -> RunState:
    for call_id in call_ids:
        call = next(c for c in state.batch if c.call_id == call_id)
        tool = tools.get(call.tool)
        if tool is None:
            raise MigrationRefused(f"call {call_id} now asks for {call.tool}, which is no tool")
        arguments = dict(call.arguments or {})
        try:
            tool.validate(arguments)
        except (ValidationError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            raise MigrationRefused(
                f"call {call_id}'s arguments do not fit {tool.name}: {first}"
            ) from None
        state = state.replace_call(
            call.evolve(
                digest=arguments_digest(tool.name, arguments),
                parameters=tool.definition.parameters,
                allowed=tool.allowed_decisions,
                category=tool.category,
                decision=None,
                decided_by=None,
                decided_at=None,
            )
        )
    return state
