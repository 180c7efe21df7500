"""A decision over HTTP: the body read into a `Decision`, checked when it is recorded
(`queue_decision` → `check_decision`, the one checker, requiring the digest the person was
shown), and each refusal answered with the one status its class has (`STATUS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopstate.engine.approval import Decision, as_decision
from loopstate.engine.errors import (
    AlreadyDecided,
    DecisionError,
    Forbidden,
    InvalidDecision,
    LoopstateError,
    NotADecision,
    NotAllowed,
    NotAwaiting,
    RunBusy,
    RunNotResumable,
    StaleDigest,
    UnknownCall,
)
from loopstate.service.problems import Problem

if TYPE_CHECKING:
    from loopstate.service.api_runs import DecisionBody

STATUS: dict[type[LoopstateError], int] = {
    UnknownCall: 404,
    NotAwaiting: 409,
    AlreadyDecided: 409,
    StaleDigest: 409,
    NotAllowed: 409,
    Forbidden: 409,
    NotADecision: 422,
    InvalidDecision: 422,
    DecisionError: 409,
    RunBusy: 409,
    RunNotResumable: 409,
}
"""The HTTP status of each refusal, by its class (the most specific class listed wins)."""


def decision_of(body: DecisionBody) -> Decision:
    """The decision `body` asks for, made by the one parser of decisions (`as_decision`);
    fields the decision's kind does not take are a 422 naming them."""
    if body.message is not None and body.decision != "deny":
        raise Problem(422, "only a denial takes a message for the model",
                      errors=[{"field": "message", "message": "deny only"}])  # fmt: skip
    if body.remember is not False and body.decision not in ("approve", "deny"):
        raise Problem(422, "only an approval or a denial can be remembered",
                      errors=[{"field": "remember", "message": "approve/deny only"}])  # fmt: skip
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
    """What `queue_decision`, `queue_message` or `abort_run` refused, as the client hears it:
    the status of its class (`STATUS`), the fields at fault for a `DecisionError`."""
    line = (str(exc).splitlines() or [type(exc).__name__])[0]
    status = next((STATUS[c] for c in type(exc).__mro__ if c in STATUS), 409)
    if isinstance(exc, RunBusy):
        line = f"run busy: {line}"
    fields = exc.errors if isinstance(exc, DecisionError) else ()
    errors = [{"field": f.field, "message": f.message} for f in fields]
    return Problem(status, line, **({"errors": errors} if errors else {}))
