"""`POST /api/runs/{run_id}/fork`: a new run whose past is the run's up to a transition,
copied with no model or tool call (see `loopstate.engine.fork`). 201 with the new `run_id`;
problem+json 404 (no such run), 409 (another process drives it), 422 (a transition or edit
the fork cannot take). With an Idempotency-Key, a repeated request gets the same answer."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from pydantic import Field, StrictInt, StrictStr

from loopstate.engine.errors import ForkRefused, RunBusy
from loopstate.engine.fork import fork_run
from loopstate.engine.store import DEFAULT_LEASE_S, lease_owner
from loopstate.service.api_runs import Answer, answer, load
from loopstate.service.inputs import Body
from loopstate.service.problems import Problem
from loopstate.service.service import Service


class ForkBody(Body):
    """A fork's request: strict and closed, its text made storable (`Body`)."""

    at: int
    """The transition (its `seq`) to fork at."""
    message: str | None = None
    replace_result: dict[str, str] | None = None
    """Tool results to replace, by call id."""
    # JSON has no tuples: the pair comes as an array, so only its items are strict.
    replace_message: Annotated[tuple[StrictInt, StrictStr] | None, Field(strict=False)] = None
    """A user message to replace: its index in the history and its new text."""


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.post("/runs/{run_id}/fork", status_code=201)
    async def fork(
        request: Request,
        run_id: str,
        body: ForkBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await service.guard.identity(request, "start", run_id)

        async def copy() -> Answer:
            await load(service, run_id)
            try:
                state = await fork_run(
                    service.store, run_id, at=body.at, new_id=uuid.uuid4().hex, by=actor,
                    clock=service.runner.clock, owner=lease_owner(), lease_s=DEFAULT_LEASE_S,
                    message=body.message, replace_result=body.replace_result,
                    replace_message=body.replace_message,
                )  # fmt: skip
            except ForkRefused as exc:
                raise Problem(422, str(exc)) from None
            except RunBusy as exc:
                raise Problem(409, f"run busy: {exc}") from None
            service.hub.touch(state.run_id)
            return 201, {"run_id": state.run_id, "forked_from": {"run_id": run_id, "seq": body.at}}

        if idempotency_key is None:
            return answer(await copy())
        scope = f"{actor} fork {run_id}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), copy))

    return router
