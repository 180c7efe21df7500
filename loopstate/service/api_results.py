"""`POST /api/runs/{run_id}/calls/{call_id}/result`: the result of an external tool's call
(`@tool(external=True)`, e.g. `ask_person`) supplied over HTTP — a person's answer from the
inbox, a client-side tool run in a browser. Checked before it is recorded, so each refusal
has its own status: 404 unknown call, 409 a call not awaiting a result, 422 a value that does
not fit the tool's declared result type (field by field). `queue_decision` checks again under
the lease; the run's next resume gives the value to the model."""

from __future__ import annotations

from typing import Any

import jsonschema
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from loopstate.engine.approval import Result
from loopstate.engine.errors import DecisionError, RunBusy, RunNotResumable
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.store import ready
from loopstate.service.api_runs import Answer, answer, load
from loopstate.service.decisions import as_problem
from loopstate.service.inputs import Body, JsonValue, check_id
from loopstate.service.problems import Problem
from loopstate.service.service import Service


class ResultBody(Body):
    value: JsonValue
    """Any JSON value (null included); it must fit the tool's declared result type."""


def check_result(state: RunState, call_id: str, value: Any) -> CallRecord:
    """The call that takes `value`, or the `Problem` saying why it cannot."""
    call = next((c for c in state.calls if c.call_id == call_id), None)
    if call is None:
        raise Problem(404, f"run {state.run_id} has no call {call_id!r}")
    if not call.external:
        raise Problem(409, f"call {call_id} ({call.tool}) is not an external tool's call: "
                      "decide it at .../decision")  # fmt: skip
    if state.state != "awaiting_approval" or call not in state.batch:
        raise Problem(409, f"run {state.run_id} is {state.status}, not awaiting a result")
    if call.status != "awaiting" or any(q.call_id == call_id for q in state.inbox):
        raise Problem(409, f"call {call_id} already has its result")
    if call.result_schema is not None:
        validator = jsonschema.Draft202012Validator(call.result_schema)
        errors = [
            {"field": ".".join(["value", *map(str, e.absolute_path)]), "message": e.message}
            for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        ]
        if errors:
            shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
            raise Problem(422, f"invalid result for {call.tool}: {shown}", errors=errors)
    return call


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.post("/runs/{run_id}/calls/{call_id}/result")
    async def supply(
        request: Request,
        run_id: str,
        call_id: str,
        body: ResultBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await service.guard.identity(request, "decide", run_id)
        check_id(run_id, "run")
        check_id(call_id, "call")
        if not idempotency_key:
            raise Problem(400, "a result requires an Idempotency-Key header")

        async def record() -> Answer:
            async with service.run_lock(run_id):
                call = check_result(await load(service, run_id), call_id, body.value)
                result = Result(body.value, digest=call.digest)
                try:
                    state = await queue_decision(
                        service.store, run_id, call_id, result,
                        actor=actor, clock=service.runner.clock,
                    )  # fmt: skip
                except (DecisionError, RunBusy, RunNotResumable) as exc:
                    raise as_problem(exc) from None
            service.hub.touch(run_id)
            continues = ready(state)
            if continues:
                service.runner.worker.wake()
            return 200, {"run_id": run_id, "call_id": call_id, "actor": actor,
                         "continues": continues}  # fmt: skip

        scope = f"{actor} result {run_id} {call_id}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), record))

    return router
