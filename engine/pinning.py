"""A run pinned to what it was started with: the definition recorded at start, and the one
verdict every resume and every `loopstate runs check` gives (`judge`):

    compatible    the changes are allowed (`on_change`): the run goes on, the changes recorded
    migrates      a declared migration maps the run to the new definition (which one)
    incompatible  why, one line per difference: `IncompatibleRun`, nothing changed

`Pinning` is what `RunProtocol` holds for it: it keeps each distinct definition once in the
store (a definition is immutable: by fingerprint, it is read and written once per process).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from loopstate.engine.compat import Change, Pin, changes, refusals
from loopstate.engine.definition import Definition
from loopstate.engine.errors import IncompatibleRun, StaleDigest
from loopstate.engine.migration import MigrationRefused, migrate, migration_for
from loopstate.engine.state import Redefinition, RunState
from loopstate.engine.store import Store

Verdict = Literal["compatible", "migrates", "incompatible"]


@dataclass(frozen=True)
class Judgement:
    """The verdict on one run, the lines that explain it, and the run as it would go on."""

    verdict: Verdict
    lines: tuple[str, ...]
    state: RunState
    migration: str | None = None
    rebound: tuple[str, ...] = ()
    """Waiting calls the migration bound anew (their digest derived again)."""

    def summary(self) -> str:
        """One line: the verdict, then why (`loopstate runs check`)."""
        head = f"migrates by {self.migration}" if self.verdict == "migrates" else self.verdict
        return head + (f": {'; '.join(self.lines)}" if self.lines else "")


def judge(state: RunState, before: Definition | None, pin: Pin) -> Judgement:
    """Whether `state` (started under `before`, None: unknown) goes on under `pin`."""
    same = before is not None and before.fingerprint == pin.fingerprint
    migration = None if same else migration_for(pin.migrations, before)
    if migration is None:
        found = changes(state, before, pin)
        refused = refusals(found, pin.policy)
        if refused:
            return Judgement(verdict="incompatible", lines=refused, state=state)
        return Judgement(verdict="compatible", lines=_texts(found), state=state)
    try:
        migrated = migrate(state, migration, pin.tools)
    except MigrationRefused as exc:
        line = f"migration {migration.name} refused: {exc}"
        return Judgement(verdict="incompatible", lines=(line,), state=state)
    found = changes(migrated.state, before, pin)
    broken = tuple(c.text for c in found if c.breaking)  # the migration declared the rest
    if broken:
        lines = tuple(f"after migration {migration.name}: {b}" for b in broken)
        return Judgement(verdict="incompatible", lines=lines, state=state)
    dropped = tuple(
        f"queued decision for {c} dropped: made for the old form" for c in migrated.dropped
    )
    return Judgement(
        verdict="migrates",
        lines=(*_texts(found), *dropped),
        state=migrated.state,
        migration=migration.name,
        rebound=migrated.rebound,
    )


def _texts(found: tuple[Change, ...]) -> tuple[str, ...]:
    return tuple(c.text for c in found)


class Pinning:
    """The definitions of one store as this process knows them: kept once, read once."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._known: dict[str, Definition | None] = {}

    async def keep(self, pin: Pin) -> str:
        """Store the pin's definition unless this process did already; its fingerprint."""
        fingerprint, definition = pin.fingerprint, pin.definition
        if self._known.get(fingerprint) is None:
            await self.store.keep_definition(fingerprint, definition.model_dump(mode="json"))
            self._known[fingerprint] = definition
        return fingerprint

    async def recorded(self, fingerprint: str | None) -> Definition | None:
        """The definition a run recorded (None: none, or not in the store, or unreadable)."""
        if fingerprint is None:
            return None
        if fingerprint not in self._known:
            self._known[fingerprint] = _read(await self.store.definition(fingerprint))
        return self._known[fingerprint]

    async def settle(
        self, state: RunState, pin: Pin, decisions: Mapping[str, Any] | None, *, at: float, by: str
    ) -> RunState:
        """The run as it goes on under `pin`: unchanged, recorded under its new definition,
        or migrated; `IncompatibleRun` (nothing changed) if it cannot."""
        fingerprint = pin.fingerprint
        if state.definition == fingerprint:
            return state  # the same definition (by content): the run fits as it did
        before = await self.recorded(state.definition)
        judged = judge(state, before, pin)
        if judged.verdict == "incompatible":
            raise IncompatibleRun(state.run_id, judged.lines)
        _refuse_old_forms(judged, decisions)
        await self.keep(pin)
        record = Redefinition(
            at=at,
            by=by,
            before=state.definition,
            after=fingerprint,
            changes=judged.lines,
            migration=judged.migration,
        )
        return judged.state.evolve(
            definition=fingerprint, redefinitions=(*state.redefinitions, record)
        )


def _refuse_old_forms(judged: Judgement, decisions: Mapping[str, Any] | None) -> None:
    """A decision given with this resume for a call the migration bound anew is for the form
    the person saw before: refused unless it carries the new digest."""
    for call_id in judged.rebound:
        given = (decisions or {}).get(call_id)
        if given is None:
            continue
        call = next(c for c in judged.state.batch if c.call_id == call_id)
        if getattr(given, "digest", None) != call.digest:
            raise StaleDigest(
                f"call {call_id} was migrated by {judged.migration} (now {call.tool}, digest "
                f"{call.digest}): decide what will run, with that digest"
            )


def _read(body: dict[str, Any] | None) -> Definition | None:
    if body is None:
        return None
    try:
        return Definition.model_validate(body)
    except ValidationError:
        return None  # a definition this loopstate cannot read: judged as unknown
