"""The one checker of a decision: whether `decision` may be used for `call_id` of a run.

Every door calls it: the Python API (`resume(decisions=)`, an approver, remembered and queued
decisions, through `Decisions.apply`), a decision queued on a stored run (the CLI, HTTP:
`operations.queue_decision`), and Temporal's Update validator. It decides nothing and changes
nothing; a refusal is a typed `DecisionError` naming the fields at fault, in this order:

    NotADecision → Forbidden (an approval or edit of a call a forbidding rule of the run
    matches: the server's policy overrides a client's approval) → UnknownCall →
    AlreadyDecided → NotAwaiting → InvalidDecision (digest required) → StaleDigest →
    NotAllowed → InvalidDecision (an edit's arguments, a result's value: by the tool's own
    model when the process has the tool, else by the JSON schema stored with the call)

A decision may come as a boolean (seed 001's approver answers `true` to approve): `as_decision`
makes `True` an `Approve()` and `False` a `Deny` with a standard reason (`BOOLEAN_DENIAL`),
before any check; any other value that is not a decision is `NotADecision`.

What is checked here is the decision's meaning for the run; the shape of outside input (a
request body, its encoding) is checked where it enters.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from loopstate.engine.approval import Decision, as_decision
from loopstate.engine.errors import (
    AlreadyDecided,
    FieldError,
    Forbidden,
    InvalidDecision,
    NotAllowed,
    NotAwaiting,
    StaleDigest,
    UnknownCall,
)
from loopstate.engine.rule import forbidding
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.tool import Tool

if TYPE_CHECKING:
    import jsonschema


class Checked(NamedTuple):
    """A decision that may be used, and the call it is for."""

    call: CallRecord
    decision: Decision


def check_decision(
    state: RunState,
    call_id: str,
    decision: object,
    *,
    tools: Mapping[str, Tool] | None = None,
    queued: Collection[str] = (),
    bound: bool = False,
) -> Checked:
    """`decision` (a `Decision` or its dict form) for `call_id` of `state`, once it may be used;
    the `DecisionError` subclass saying why not otherwise. `tools` are the run's tools when
    this process has them (an edit is validated by the tool's model, else by its stored
    schema); `queued` the calls with a decision on its way besides the run's inbox; `bound`
    asks for a digest on every decision but an abort (a person deciding what they were shown)."""
    decision = as_decision(decision)
    _forbidden(state, call_id, decision)
    call = _awaiting(state, call_id, decision, queued)
    _bound(call, decision, bound)
    if decision.kind not in call.allowed:
        hint = "; it is not an external tool's call" if decision.kind == "result" else ""
        raise NotAllowed(
            f"{call.tool} does not accept {decision.kind!r} for call {call.call_id}{hint}; "
            f"allowed: {', '.join(call.allowed)}"
        )
    tool = (tools or {}).get(call.tool)
    if decision.kind == "edit":
        _refuse("edit", call, _edit_errors(call, tool, decision.arguments))
    if decision.kind == "result":
        _refuse("result", call, _result_errors(call, tool, decision.value))
    return Checked(call, decision)


def _forbidden(state: RunState, call_id: str, decision: Decision) -> None:
    """Refuse to let a call run that a forbidding rule of the run matches (with an edit's
    arguments, for an edit): whoever approves it."""
    if decision.kind not in ("approve", "edit") or not state.rules:
        return
    call = next((c for c in state.calls if c.call_id == call_id), None)
    if call is None:
        return
    arguments = decision.arguments if decision.kind == "edit" else None
    rule = forbidding(state.rules, call.request(), arguments)
    if rule is not None:
        why = f": {rule.reason}" if rule.reason else ""
        raise Forbidden(
            f"call {call_id} ({call.tool}) is forbidden by rule {rule.name}{why}; "
            "no approval can let it run (deny or abort it)",
            rule=rule.name,
        )


def _awaiting(
    state: RunState, call_id: str, decision: Decision, queued: Collection[str]
) -> CallRecord:
    """The call, once it waits for this decision in a run that waits for decisions. A call
    that has its decision says so whatever the run does since (it may have moved on)."""
    run_id, result = state.run_id, decision.kind == "result"
    call = next((c for c in state.calls if c.call_id == call_id), None)
    if call is None:
        pending = ", ".join(c.call_id for c in state.batch if c.status == "awaiting") or "none"
        raise UnknownCall(f"run {run_id} has no call {call_id} to decide (pending: {pending})")
    what = "a result" if result else "a decision"
    if call not in state.batch or call.status != "awaiting":
        raise AlreadyDecided(
            f"call {call_id} ({call.tool}) is not awaiting {what} (it is {call.status}); "
            "a decision is used once"
        )
    if call_id in queued or any(q.call_id == call_id for q in state.inbox):
        done = "already has its result" if result else "is already decided"
        raise AlreadyDecided(f"call {call_id} ({call.tool}) {done}; a decision is used once")
    if state.state != "awaiting_approval":
        what = "a result" if result else "approval"
        raise NotAwaiting(f"run {run_id} is {state.status}, not awaiting {what}")
    return call


def _bound(call: CallRecord, decision: Decision, required: bool) -> None:
    """Refuse a decision made for other arguments (or, if `required`, for none named)."""
    if decision.digest is None:
        if required and decision.kind != "abort":
            raise InvalidDecision(
                "digest is required: the digest of the arguments you were shown",
                errors=(FieldError("digest", "required"),),
            )
        return
    if decision.digest != call.digest:
        raise StaleDigest(
            f"decision for call {call.call_id} was made for other arguments "
            f"(digest {decision.digest}, the call's is {call.digest})"
        )


def _refuse(what: str, call: CallRecord, errors: list[FieldError]) -> None:
    if errors:
        shown = "; ".join(f"{e.field}: {e.message}" for e in errors)
        raise InvalidDecision(
            f"{what} for call {call.call_id} ({call.tool}) refused: {shown}", errors=tuple(errors)
        )


def _edit_errors(call: CallRecord, tool: Tool | None, arguments: Any) -> list[FieldError]:
    if not isinstance(arguments, dict):
        kind = type(arguments).__name__
        return [FieldError("arguments", f"must be a JSON object, not {kind}")]
    if tool is not None:
        try:
            tool.validate(arguments)
        except ValidationError as exc:
            return _pydantic(exc)
        return []
    return _schema(call.parameters, arguments)


def _result_errors(call: CallRecord, tool: Tool | None, value: Any) -> list[FieldError]:
    """A result by the tool's result type; the answer to a question the tool asked
    (`ctx.ask`), or a result without the tool at hand, by the schema stored with the call."""
    if tool is not None and not call.asking:
        try:
            tool.result_adapter.validate_python(value)
        except ValidationError as exc:
            return _pydantic(exc, "value")
        return []
    return _schema(call.result_schema, value, "value")


def _pydantic(exc: ValidationError, *prefix: str) -> list[FieldError]:
    return [
        FieldError(".".join(map(str, (*prefix, *e["loc"]))) or "arguments", e["msg"])
        for e in exc.errors(include_url=False)
    ]


def _schema(schema: dict[str, Any] | None, value: Any, *prefix: str) -> list[FieldError]:
    """`value` against a stored JSON schema, field by field (none stored: nothing to check)."""
    if schema is None:
        return []
    import jsonschema  # on first use: ~75 ms that `import loopstate` need not pay

    found = jsonschema.Draft202012Validator(schema).iter_errors(value)
    return [
        FieldError(".".join((*prefix, *map(str, e.absolute_path))) or _missing(e), e.message)
        for e in sorted(found, key=lambda e: list(map(str, e.absolute_path)))
    ]


def _missing(error: jsonschema.ValidationError) -> str:
    """A missing property is reported on the object: name the property itself."""
    wanted = error.validator_value
    if error.validator == "required" and isinstance(error.instance, dict):
        absent = [k for k in wanted if k not in error.instance] if isinstance(wanted, list) else []
        if absent:
            return str(absent[0])
    return "arguments"
