"""Decisions on gated tool calls, the requests that ask for them, and the approver port."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from loopstate.engine.data import Frozen
from loopstate.engine.errors import DecisionError


class Approve(Frozen):
    """Run the call as the model asked."""

    kind: Literal["approve"] = "approve"
    digest: str | None = None


class Deny(Frozen):
    """Do not run the call; the model receives `reason` as the call's result and goes on."""

    kind: Literal["deny"] = "deny"
    digest: str | None = None
    reason: str

    def __init__(self, reason: str = "denied", /, **data: Any) -> None:
        BaseModel.__init__(self, reason=data.pop("reason", reason), **data)


class Edit(Frozen):
    """Run the call with these arguments instead; they are validated, and the model is told."""

    kind: Literal["edit"] = "edit"
    digest: str | None = None
    arguments: dict[str, Any]

    def __init__(self, arguments: dict[str, Any] | None = None, /, **data: Any) -> None:
        BaseModel.__init__(self, arguments=data.pop("arguments", arguments), **data)


class Abort(Frozen):
    """End the whole run now: no further tool, no further model call."""

    kind: Literal["abort"] = "abort"
    digest: str | None = None
    reason: str

    def __init__(self, reason: str = "aborted", /, **data: Any) -> None:
        BaseModel.__init__(self, reason=data.pop("reason", reason), **data)


Decision = Annotated[Approve | Deny | Edit | Abort, Field(discriminator="kind")]
"""A decision may carry the `digest` of the request it answers; if it does, it is refused
when the call's arguments differ."""


class ApprovalRequest(Frozen):
    """One gated call of a step, as a person or policy sees it."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    digest: str
    """Binds a decision to exactly these arguments (see `arguments_digest`)."""


Approver = Callable[[list[ApprovalRequest]], Awaitable[Mapping[str, Decision]]]
"""Receives every gated call of one step; returns a decision per call id. A call left out is
not decided yet: the run suspends there."""


def arguments_digest(tool: str, arguments: Any) -> str:
    """A short stable digest of a call's tool and arguments (canonical JSON, SHA-256)."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


_DECISION: Any = None


def as_decision(value: Any) -> Decision:
    """A `Decision` from a decision object or its JSON form (`{"kind": "approve"}`);
    `DecisionError` for anything else."""
    if isinstance(value, Approve | Deny | Edit | Abort):
        return value
    global _DECISION
    if _DECISION is None:
        from pydantic import TypeAdapter

        _DECISION = TypeAdapter(Decision)
    try:
        decision: Decision = _DECISION.validate_python(value)
    except ValidationError as exc:
        raise DecisionError(f"{value!r} is not a decision: {exc.errors()[0]['msg']}") from None
    return decision
