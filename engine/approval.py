"""Decisions on gated tool calls, the requests that ask for them, and the approver port.

`as_decision` and `as_approver` are the boundary: whatever a caller hands in (a decision's
dict form, a sync approver) becomes these types there, or is refused with a clear error.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, model_validator

from loopstate.engine.arguments import Arguments
from loopstate.engine.data import Frozen
from loopstate.engine.errors import DefinitionError, NotADecision
from loopstate.engine.outside import OutsideError, outside, outside_json
from loopstate.engine.rule import Rule


def _same_way(kind: str, remember: bool | Rule) -> None:
    """A rule remembered with a decision must decide the same way as the decision."""
    if isinstance(remember, Rule) and remember.decision != kind:
        raise ValueError(
            f"remember: rule {remember.name!r} decides {remember.decision!r}, "
            f"but it is remembered with {kind!r}"
        )


class Approve(Frozen):
    """Run the call as the model asked."""

    kind: Literal["approve"] = "approve"
    digest: str | None = None
    by: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    """Given to the tool as `ToolContext.decision_data`; never shown to the model."""
    remember: bool | Rule = False
    """`True`: approve this tool's later calls in this run too; a `Rule` (deciding
    "approve"): approve the later calls matching it. Revocable: `Agent.forget`."""

    @model_validator(mode="after")
    def _remembered_rule_agrees(self) -> Approve:
        _same_way(self.kind, self.remember)
        return self


class Deny(Frozen):
    """Do not run the call; the model receives `reason` as the call's result and goes on."""

    kind: Literal["deny"] = "deny"
    digest: str | None = None
    by: str | None = None
    reason: str
    message: str | None = None
    """The exact text the model receives instead of the default denial note (which quotes
    `reason`); the audit trail keeps `reason` either way."""
    remember: bool | Rule = False
    """`True`: deny this tool's later calls in this run too, with this reason and message;
    a `Rule` (deciding "deny"): deny the later calls matching it. Revocable: `Agent.forget`."""

    @model_validator(mode="after")
    def _remembered_rule_agrees(self) -> Deny:
        _same_way(self.kind, self.remember)
        return self

    def __init__(self, reason: str = "denied", /, **data: Any) -> None:
        BaseModel.__init__(self, reason=data.pop("reason", reason), **data)


class Edit(Frozen):
    """Run the call with these arguments instead; they are validated, and the model is told."""

    kind: Literal["edit"] = "edit"
    digest: str | None = None
    by: str | None = None
    arguments: Arguments
    data: dict[str, Any] = Field(default_factory=dict)
    """Given to the tool as `ToolContext.decision_data`; never shown to the model."""

    def __init__(self, arguments: dict[str, Any] | None = None, /, **data: Any) -> None:
        BaseModel.__init__(self, arguments=data.pop("arguments", arguments), **data)


class Result(Frozen):
    """The result of an external tool's call (`@tool(external=True)`), supplied from outside:
    validated against the tool's declared result type, then given to the model."""

    kind: Literal["result"] = "result"
    digest: str | None = None
    by: str | None = None
    value: Any
    """JSON data: finite numbers, nested at most 64 deep, bounded in size — checked where it
    enters (`as_decision`, `engine/outside.py`), not again each time a stored run is read."""

    def __init__(self, value: Any = None, /, **data: Any) -> None:
        BaseModel.__init__(self, value=data.pop("value", value), **data)


class Abort(Frozen):
    """End the whole run now: no further tool, no further model call."""

    kind: Literal["abort"] = "abort"
    digest: str | None = None
    by: str | None = None
    reason: str

    def __init__(self, reason: str = "aborted", /, **data: Any) -> None:
        BaseModel.__init__(self, reason=data.pop("reason", reason), **data)


Decision = Annotated[Approve | Deny | Edit | Abort | Result, Field(discriminator="kind")]
"""`by` names what inside an approver decided (a rule of an `ApprovalPolicy`): the audit
records the decision as made by `approver:<by>`."""
DecisionKind = Literal["approve", "deny", "edit", "abort", "result"]
DECISION_KINDS: tuple[DecisionKind, ...] = ("approve", "deny", "edit", "abort")
"""A decision may carry the `digest` of the request it answers; if it does, it is refused
when the call's arguments differ."""


class ApprovalRequest(Frozen):
    """One gated call of a step, as a person or policy sees it."""

    call_id: str
    tool: str
    arguments: Arguments
    """Read-only (see `loopstate.engine.arguments`): decide an `Edit` to change them."""
    reason: str
    digest: str
    """Binds a decision to exactly these arguments (see `arguments_digest`)."""
    external: bool = False
    """An external tool's call: it waits for a `Result` (`resume(results=...)`), not approval."""
    category: str = "general"
    """The tool's `category`: approval rules may match on it."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Set by the tool's approval predicate (see `Gate`), for the person or policy deciding."""
    allowed: tuple[DecisionKind, ...] = DECISION_KINDS
    """The decisions this call's tool accepts (`@tool(allowed_decisions=...)`); any other is
    refused wherever it comes from."""
    deadline: float | None = None
    """When a decision is due (a time on the run's clock), if the tool set one."""
    run_id: str | None = None
    """The run the call belongs to, when listed with the runs it delegated to (`pending_tree`):
    a sub-agent's call may wait in a child run."""


class Gate(Frozen):
    """What a tool's approval predicate may return instead of `True`: the call waits, and
    its request carries this description (as its reason) and metadata."""

    kind: Literal["gate"] = "gate"
    description: str
    metadata: dict[str, Any] = Field(default_factory=dict)


Approver = Callable[[list[ApprovalRequest]], Awaitable[Mapping[str, Decision | bool]]]
SyncApprover = Callable[[list[ApprovalRequest]], Mapping[str, Any]]
"""A blocking approver (e.g. one that asks on a terminal): `Agent` runs it in a thread."""
"""Receives every gated call of one step; returns a decision per call id (`True` approves,
`False` denies with a standard reason). A call left out is not decided yet: the run suspends
there."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
"""`json.dumps` with these options, made once (`dumps` builds an encoder on every call)."""


def arguments_digest(tool: str, arguments: Any) -> str:
    """A short stable digest of a call's tool and arguments (canonical JSON, SHA-256)."""
    canonical = _CANONICAL.encode([tool, arguments])
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


_DECISION: TypeAdapter[Decision] = TypeAdapter(Decision)
_KINDS = "approve, deny, edit or abort"


BOOLEAN_DENIAL = "denied by the approver (it answered False)"
"""The reason a `False` answer gives its `Deny`, as the model and the audit trail see it."""


def as_decision(value: object) -> Decision:
    """A decision from a `Decision` object, its dict form (`{"kind": "approve"}`) or its JSON
    text, or a boolean (an approver answering as in seed 001's `onToolApproval`: `True` is
    `Approve()`, `False` is `Deny(BOOLEAN_DENIAL)`); `DecisionError` for anything else, saying
    what a decision looks like. Its text passes the entry rule for outside data
    (`engine/outside.py`): it is made storable."""
    if isinstance(value, Approve | Deny | Edit | Abort | Result):
        return _entered(value)
    if value is True or value is False:
        return Approve() if value else Deny(BOOLEAN_DENIAL)
    try:
        if isinstance(value, str | bytes):
            return _entered(_DECISION.validate_json(value))
        if isinstance(value, Mapping):
            return _entered(_DECISION.validate_python(dict(value)))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "decision"
        raise NotADecision(
            f"not a decision ({where}: {first['msg']}); give Approve(), Deny(reason), "
            f"Edit(arguments) or Abort(reason), their dict form with kind {_KINDS}, or "
            "True (approve) / False (deny)"
        ) from None
    raise NotADecision(
        f"{type(value).__name__} is not a decision; give Approve(), Deny(reason), "
        f"Edit(arguments) or Abort(reason), their dict form with kind {_KINDS}, or "
        "True (approve) / False (deny)"
    )


def _entered(decision: Decision) -> Decision:
    """`decision` past the entry rule for outside data: its text storable, a result's value
    storable JSON (`DecisionError` naming where it is not)."""
    if isinstance(decision, Result):
        try:
            return outside(decision.evolve(value=outside_json(decision.value)))
        except OutsideError as exc:
            raise NotADecision(f"result refused: {exc}") from None
    return outside(decision)


def as_result(value: object) -> Result:
    """An external tool's result from outside; `DecisionError` naming where it is not JSON
    data a run can keep (see `engine/outside.py`)."""
    result = as_decision(Result(value))
    assert isinstance(result, Result)
    return result


def as_decisions(value: object) -> dict[str, Decision]:
    """Decisions by call id (see `as_decision`); `DecisionError` if `value` is not a mapping
    of call ids to decisions."""
    if not isinstance(value, Mapping):
        raise NotADecision(f"decisions must map call ids to decisions, not {type(value).__name__}")
    decisions: dict[str, Decision] = {}
    for call_id, decision in value.items():
        if not isinstance(call_id, str):
            raise NotADecision(f"decisions must be keyed by call id (a str), not {call_id!r}")
        decisions[call_id] = as_decision(decision)
    return decisions


def as_approver(approver: object) -> Approver:
    """`approver` as an `Approver`: an async callable is used as it is, a sync one runs in a
    worker thread (it may block, e.g. on a terminal); either may return decisions in their
    dict form. Raises `DefinitionError` at once for something that is not a callable taking
    the list of requests, instead of failing the run after a paid model call."""
    if not callable(approver):
        raise DefinitionError(
            f"approver must be a function taking the list of ApprovalRequest, "
            f"not {type(approver).__name__}"
        )
    _check_arity(approver)
    call: Callable[[list[ApprovalRequest]], Any] = approver
    is_async = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004  # an object with an async __call__
    )

    async def adapted(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        answer = call(requests) if is_async else await asyncio.to_thread(call, requests)
        if inspect.isawaitable(answer):
            answer = await answer
        return as_decisions(answer)

    adapted.__name__ = getattr(approver, "__name__", type(approver).__name__)
    adapted.__wrapped__ = approver  # type: ignore[attr-defined]  # for introspection
    return adapted


def _check_arity(approver: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(approver)
    except (TypeError, ValueError):  # some builtins have none: nothing to check
        return
    try:
        signature.bind([])
    except TypeError:
        raise DefinitionError(
            f"approver {getattr(approver, '__name__', approver)!r} must take exactly one "
            f"argument, the list of ApprovalRequest; its signature is {signature}"
        ) from None
