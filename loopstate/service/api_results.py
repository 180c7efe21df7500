"""`POST /api/runs/{run_id}/calls/{call_id}/result`: the result of an external tool's call
(`@tool(external=True)`, e.g. `ask_person`) supplied over HTTP — a person's answer from the
inbox, a client-side tool run in a browser. Checked when it is recorded (`queue_decision` →
`check_decision`, the one checker), each refusal with its class's status (`STATUS` in
`loopstate.service.decisions`): 404 unknown call, 409 a call not awaiting a result or not an
external tool's, 422 a value that does not fit the tool's declared result type (field by
field). The run's next resume gives the value to the model."""

from __future__ import annotations

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from loopstate.engine.approval import Result
from loopstate.engine.errors import DecisionError, RunBusy, RunNotResumable
from loopstate.engine.operations import queue_decision
from loopstate.engine.store import ready
from loopstate.service.api_runs import Answer, answer, load
from loopstate.service.decisions import as_problem
from loopstate.service.inputs import Body, JsonValue, check_id
from loopstate.service.problems import Problem
from loopstate.service.service import Service


class ResultBody(Body):
    value: JsonValue
    """Any JSON value (null included); it must fit the tool's declared result type."""


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
                await load(service, run_id)  # an unknown run: 404
                try:
                    state = await queue_decision(
                        service.store, run_id, call_id, Result(body.value),
                        actor=actor, clock=service.runner.clock, routed=False,
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
