"""A decision over HTTP checked before it is recorded, so each refusal gets its own status:
404 unknown call, 409 already decided / stale digest / run not waiting, 422 an edit that does
not fit the tool's schema (field by field). `queue_decision` checks again under the lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema

from loopstate.engine.approval import Decision, as_decision
from loopstate.engine.errors import DecisionError, LoopstateError, RunBusy, RunNotResumable
from loopstate.engine.state import CallRecord, RunState
from loopstate.service.problems import Problem

if TYPE_CHECKING:
    from loopstate.service.api_runs import DecisionBody


def check_decision(state: RunState, call_id: str, body: DecisionBody) -> RunState:
    call = next((c for c in state.calls if c.call_id == call_id), None)
    if call is None:
        raise Problem(404, f"run {state.run_id} has no call {call_id!r}")
    if state.state != "awaiting_approval":
        raise Problem(409, f"run {state.run_id} is {state.status}, not awaiting approval")
    if (
        call not in state.batch
        or call.status != "awaiting"
        or any(q.call_id == call_id for q in state.inbox)
    ):
        raise Problem(409, f"call {call_id} is already decided")
    if body.decision != "abort" and body.digest is None:
        raise Problem(422, "digest is required: the digest of the arguments you were shown",
                      errors=[{"field": "digest", "message": "required"}])  # fmt: skip
    if body.digest is not None and body.digest != call.digest:
        raise Problem(409, f"stale digest: the arguments of call {call_id} changed since shown")
    if body.decision == "edit":
        check_edit(call, body.arguments)
    if body.message is not None and body.decision != "deny":
        raise Problem(422, "only a denial takes a message for the model",
                      errors=[{"field": "message", "message": "deny only"}])  # fmt: skip
    if body.remember is not False and body.decision not in ("approve", "deny"):
        raise Problem(422, "only an approval or a denial can be remembered",
                      errors=[{"field": "remember", "message": "approve/deny only"}])  # fmt: skip
    return state


def check_edit(call: CallRecord, arguments: dict[str, Any] | None) -> None:
    if arguments is None:
        raise Problem(422, "an edit needs arguments",
                      errors=[{"field": "arguments", "message": "required"}])  # fmt: skip
    if call.parameters is None:
        return
    validator = jsonschema.Draft202012Validator(call.parameters)
    errors = [
        {"field": ".".join(map(str, e.absolute_path)) or _missing(e), "message": e.message}
        for e in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    ]
    if errors:
        shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise Problem(422, f"invalid edit: {shown}", errors=errors)


def _missing(error: jsonschema.ValidationError) -> str:
    """A missing property is reported on the object: name the property itself."""
    if error.validator == "required" and isinstance(error.instance, dict):
        wanted = error.validator_value
        absent = [k for k in wanted if k not in error.instance] if isinstance(wanted, list) else []
        if absent:
            return str(absent[0])
    return "arguments"


def decision_of(body: DecisionBody, state: RunState, call_id: str) -> Decision:
    """The decision `body` asks for, made by the one parser of decisions (`as_decision`);
    a remembered rule that selects nothing is a 422 naming `remember`."""
    form: dict[str, Any] = {"kind": body.decision, "digest": body.digest}
    match body.decision:
        case "approve":
            form["remember"] = _remembered(body)
        case "deny":
            form |= {"reason": body.reason or "denied", "message": body.message}
            form["remember"] = _remembered(body)
        case "edit":
            form["arguments"] = body.arguments or {}
        case "abort":
            form["reason"] = body.reason or "aborted"
    try:
        return as_decision(form)
    except DecisionError as exc:
        raise Problem(422, str(exc), errors=[{"field": "remember", "message": str(exc)}]) from None


def _remembered(body: DecisionBody) -> bool | dict[str, Any]:
    """`remember` as `Approve`/`Deny` take it: a flag, or a rule deciding as `body` does."""
    if isinstance(body.remember, bool):
        return body.remember
    selection = body.remember.model_dump(exclude={"name"}, exclude_none=True)
    name = body.remember.name or " ".join(f"{k}={v}" for k, v in selection.items())
    rule: dict[str, Any] = {"name": name, "decision": body.decision, **selection}
    if body.decision == "deny":
        rule |= {"reason": body.reason or "denied", "message": body.message}
    return rule


def as_problem(exc: LoopstateError) -> Problem:
    """What `queue_decision` or `abort_run` refused, as the client hears it."""
    line = (str(exc).splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, RunBusy):
        return Problem(409, f"run busy: {line}")
    if isinstance(exc, RunNotResumable | DecisionError):
        return Problem(409, line)
    return Problem(409, line)
