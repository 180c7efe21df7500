"""`POST /api/runs/{run_id}/retry`: call the model again for a run resting in `model_failed`
(its model call failed and its retries are spent), as `Agent.resume` does locally and
`loopstate temporal retry` does on Temporal. Any other run: 409, saying what it is.
`GET /api/me`: who the asker is (name, tenant, roles, whether it may act), for the pages."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from loopstate.engine.errors import DecisionError, RunBusy, RunNotResumable
from loopstate.service.api_runs import Answer, answer, load
from loopstate.service.decisions import as_problem
from loopstate.service.inputs import Body, check_id
from loopstate.service.problems import Problem
from loopstate.service.service import Service

MODEL_FAILED = "model_failed"


class RetryBody(Body):
    pass


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/me")
    async def me(request: Request) -> dict[str, Any]:
        who = await service.guard.who(request, "read", None)
        return {**who.model_dump(mode="json"), "may_act": who.may_act}

    @router.post("/runs/{run_id}/retry", status_code=202)
    async def retry(
        request: Request,
        run_id: str,
        body: RetryBody | None = None,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await service.guard.identity(request, "decide", run_id)
        check_id(run_id, "run")

        async def again() -> Answer:
            state = await load(service, run_id)
            if state.state != MODEL_FAILED:
                raise Problem(409, f"run {run_id} is {state.state}, not {MODEL_FAILED}: "
                              "only a run whose model call failed can be retried")  # fmt: skip
            try:
                await service.runner.retry(run_id, actor)
            except (RunBusy, RunNotResumable, DecisionError) as exc:
                raise as_problem(exc) from None
            return 202, {"run_id": run_id}

        if idempotency_key is None:
            return answer(await again())
        scope = f"{actor} retry {run_id}"
        return answer(await service.keys.once(scope, idempotency_key, {}, again))

    return router
