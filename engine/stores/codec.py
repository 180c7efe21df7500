"""How the SQL stores encode a run as rows (a header plus message, transition and call rows)
and decode it back, with errors that name the run, the row and the database."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from loopstate.engine.errors import RunDamaged, StoreError
from loopstate.engine.messages import Message
from loopstate.engine.state import SCHEMA_VERSION, CallRecord, RunState, Transition
from loopstate.engine.store import DAMAGED, RunEvent, RunSummary, event_fields, summarize

SPLIT = {"messages", "transitions", "calls"}
NOT_IN_HEADER = {*SPLIT, "revision"}
"""A run's fields its header row does not hold (`revision` is a column: the store bumps it)."""
COUNTS = {"messages": "message_count", "transitions": "transition_count", "calls": "call_count"}
"""Header keys holding how many rows each table has for the run: a lost row is detected."""
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_SUMMARY = tuple(name for name in RunSummary.model_fields if name != "problem")
"""The summary columns of a runs row, in order."""

Rows = Iterable[tuple[int, Any]]
"""(index, body) rows of one table for one run, in order."""


def summary_columns(state: RunState) -> tuple[Any, ...]:
    s = summarize(state)
    return (
        s.run_id, s.machine, s.state, s.status, s.steps, s.pending,
        s.created_at, s.updated_at, s.stop_reason,
    )  # fmt: skip


def header(state: RunState) -> str:
    fields = state.model_dump(mode="json", exclude=NOT_IN_HEADER)
    for table, key in COUNTS.items():
        fields[key] = len(getattr(state, table))
    return json.dumps(fields, separators=(",", ":"))


def rows(run_id: str, start: int, items: Iterable[Any]) -> Iterable[tuple[str, int, str]]:
    return (
        (run_id, start + i, item.model_dump_json(exclude_none=True)) for i, item in enumerate(items)
    )


def transition_rows(state: RunState, first: int) -> Iterable[tuple[str, int, str]]:
    return ((state.run_id, t.seq, t.model_dump_json()) for t in state.transitions[first:])


def event_row(state: RunState) -> tuple[str, str]:
    """The (run_id, body) of the event log entry for a write of `state` (the id is the
    database's)."""
    return state.run_id, json.dumps(event_fields(state), separators=(",", ":"))


def decode_event(row: tuple[Any, ...], where: str) -> RunEvent:
    event_id, body = row
    fields = _json(body, "?", "events", event_id, StoreError)
    try:
        return RunEvent.model_validate({**fields, "id": event_id})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise StoreError(
            f"corrupt events row {event_id} in {where}: {first['msg']} at {first['loc']}"
        ) from None


LISTED = (
    "run_id, machine, state, status, steps, pending, created_at, updated_at, stop_reason, {h}, "
    "(SELECT COUNT(*) FROM {p}messages m WHERE m.run_id = r.run_id), "
    "(SELECT COUNT(*) FROM {p}transitions t WHERE t.run_id = r.run_id), "
    "(SELECT COUNT(*) FROM {p}calls c WHERE c.run_id = r.run_id)"
)
"""The columns `list_runs` reads (`{p}`: the tables' prefix; the runs table aliased `r`;
`{h}`: the header, as bytes where a file may hold text that is not UTF-8): the summary, then
what tells a damaged run — its header and how many rows each table has."""


def listed(row: tuple[Any, ...], where: str) -> RunSummary:
    """A row of `LISTED` as a summary; a run whose header is corrupt, whose rows were lost,
    or that a newer loopstate wrote is listed as `damaged` with the reason (never raised: one
    damaged run must not hide the others)."""
    summary, (header_text, *counts) = row[:9], row[9:]
    run_id = str(summary[0])
    try:
        if isinstance(header_text, bytes):
            try:
                header_text = header_text.decode()
            except UnicodeDecodeError:
                raise RunDamaged(f"run {run_id}: runs row header in {where} is not UTF-8") from None
        fields = check_header(run_id, where, header_text)
        for (table, key), found in zip(COUNTS.items(), counts, strict=True):
            expected = fields.get(key)
            if expected is not None and expected != found:
                raise RunDamaged(
                    f"run {run_id}: {found} {table} rows in {where}, its header says {expected}"
                )
        return decode_summary(summary, where)
    except RunDamaged as exc:
        return damaged(summary, str(exc))


def damaged(summary: tuple[Any, ...], problem: str) -> RunSummary:
    """A run listed as `damaged`: its id, what of its summary columns can be read, and why."""

    def number(value: Any) -> float:
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0

    return RunSummary(
        run_id=str(summary[0]),
        machine=summary[1] if isinstance(summary[1], str) else "?",
        state=DAMAGED,
        status=DAMAGED,
        steps=0,
        pending=0,
        created_at=number(summary[6]),
        updated_at=number(summary[7]),
        problem=problem.splitlines()[0] if problem else DAMAGED,
    )


def check_header(run_id: str, where: str, header_text: Any) -> dict[str, Any]:
    """The header's fields; `RunDamaged` if it is not a JSON object or a newer loopstate
    wrote it."""
    fields = _json(header_text, run_id, "runs", "header")
    version = fields.get("schema_version", 0)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RunDamaged(
            f"run {run_id} was written by a newer loopstate (run schema {version}, "
            f"this one reads up to {SCHEMA_VERSION}): upgrade loopstate"
        )
    return fields


def decode_run(
    run_id: str,
    where: str,
    header_text: str,
    messages: Rows,
    transitions: Rows,
    calls: Rows,
    *,
    revision: int = 0,
) -> RunState:
    """The run from its rows, at the stored `revision`; `RunDamaged` naming the run and row if
    anything is corrupt, lost, or written by a newer loopstate. `where` names the database."""
    fields = check_header(run_id, where, header_text)
    fields["revision"] = revision
    decoded = {
        table: [_validated(kind, body, run_id, table, i) for i, body in items]
        for table, kind, items in (
            ("messages", _MESSAGE, messages),
            ("transitions", Transition, transitions),
            ("calls", CallRecord, calls),
        )
    }
    for table, items in decoded.items():
        expected = fields.pop(COUNTS[table], None)
        if expected is not None and expected != len(items):
            raise RunDamaged(
                f"run {run_id}: {len(items)} {table} rows in {where}, its header says {expected}"
            )
    try:
        return RunState.model_validate({**fields, **decoded})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise RunDamaged(
            f"run {run_id}: corrupt runs row header in {where}: {first['msg']} at {first['loc']}"
        ) from None


def decode_summary(row: tuple[Any, ...], where: str) -> RunSummary:
    try:
        return RunSummary.model_validate(dict(zip(_SUMMARY, row, strict=True)))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise RunDamaged(
            f"run {row[0]}: corrupt runs row in {where}: {first['msg']} at {first['loc']}"
        ) from None


def _json(
    text: str, run_id: str, table: str, where: object, error: type[StoreError] = RunDamaged
) -> dict[str, Any]:
    try:
        value = from_json(text)  # pydantic-core's parser: a page of headers at a quarter the cost
    except (TypeError, ValueError) as exc:
        raise error(f"run {run_id}: corrupt {table} row {where}: {exc}") from None
    if not isinstance(value, dict):
        raise error(f"run {run_id}: corrupt {table} row {where}: not a JSON object")
    return value


def _validated(kind: Any, body: Any, run_id: str, table: str, where: object) -> Any:
    try:
        if isinstance(kind, TypeAdapter):
            return kind.validate_json(body)
        return kind.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise RunDamaged(
            f"run {run_id}: corrupt {table} row {where}: {first['msg']} at {first['loc']}"
        ) from None


def definition_body(text: str) -> dict[str, Any] | None:
    """A kept definition's body; None if it is not a JSON object (judged as unknown)."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
