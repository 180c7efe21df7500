"""The shape of each cassette record, checked line by line when a cassette is read.

A hand-edited or truncated cassette fails here with `CassetteError` naming the file, the line
and the field, instead of a `TypeError` or `KeyError` somewhere in replay (which the CLI
would report as a divergence). Records keep their dict form; unknown kinds are skipped, so a
newer loopstate may add kinds without breaking older readers. Types are strict: a version
`"1"` is not the version 1.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, field_validator

from loopstate.engine.approval import as_decision
from loopstate.engine.errors import CassetteError, DecisionError
from loopstate.engine.messages import Message
from loopstate.engine.model import ModelResponse, ToolDefinition


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    kind: str


class _Header(_Record):
    format: str
    version: int


class _Run(_Record):
    run_id: str
    machine: str | None = None


class _Model(_Record):
    step: int
    digest: str
    first: int
    messages: list[Message]
    tools: list[ToolDefinition] | None = None
    tool_choice: str
    response: ModelResponse

    @field_validator("first")
    @classmethod
    def _not_negative(cls, first: int) -> int:
        if first < 0:
            raise ValueError("must be 0 or more")
        return first


class _Decision(_Record):
    call_id: str
    tool: str
    decision: dict[str, JsonValue]

    @field_validator("decision")
    @classmethod
    def _a_decision(cls, decision: dict[str, Any]) -> dict[str, Any]:
        if decision.get("kind") != "auto":  # recorded for a call no person was asked about
            try:
                as_decision(decision)
            except DecisionError as exc:
                raise ValueError(str(exc)) from None
        return decision


class _Tool(_Record):
    call_id: str
    tool: str
    arguments: dict[str, JsonValue] | None = None
    status: str
    result: str


class _Transition(_Record):
    seq: int
    source: str
    target: str
    event: str


class _Outcome(_Record):
    status: str
    output: str | None = None
    stop_reason: str | None = None


_KINDS: dict[str, type[_Record]] = {
    "header": _Header,
    "run": _Run,
    "model": _Model,
    "decision": _Decision,
    "tool": _Tool,
    "transition": _Transition,
    "outcome": _Outcome,
}


def checked(record: object, name: str, line: int) -> dict[str, Any]:
    """`record` (one parsed line) if it has the shape of its kind; `CassetteError` if not."""
    if not isinstance(record, dict):
        raise CassetteError(
            f"{name} line {line}: a record must be a JSON object, not {type(record).__name__}"
        )
    shape = _KINDS.get(record.get("kind"), _Record)  # type: ignore[arg-type]  # any value
    try:
        shape.model_validate(record)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        kind = record.get("kind")
        raise CassetteError(
            f"{name} line {line}: malformed {kind if isinstance(kind, str) else ''} record "
            f"({where}: {first['msg']}); re-record the cassette or fix that line"
        ) from None
    return record
