"""The run endpoints: list, start, show, approvals, decide, abort."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from loopstate.engine.errors import (
    DecisionError,
    RunBusy,
    RunDamaged,
    RunNotFound,
    RunNotResumable,
)
from loopstate.engine.operations import abort_run, record_decision
from loopstate.engine.pause import pause_run
from loopstate.engine.state import RunState
from loopstate.service.compat import runs_by_compatibility
from loopstate.service.decisions import as_problem, decision_of
from loopstate.service.explain import explain, failure_text, with_errors
from loopstate.service.inputs import Body as _Body
from loopstate.service.inputs import JsonArguments, check_id, check_query
from loopstate.service.paging import approvals_page, check_limit, runs_page
from loopstate.service.problems import PROBLEM, Problem
from loopstate.service.service import Service
from loopstate.service.views import run_view

Answer = tuple[int, dict[str, Any]]


class StartBody(_Body):
    prompt: str


class RememberBody(_Body):
    """The later calls a remembered decision covers: those its selectors all match."""

    name: str | None = None
    """The rule's name (default: what it selects), to revoke it by (`loopstate forget`)."""
    tools: list[str] | None = None
    category: str | None = None
    pattern: str | None = None


class DecisionBody(_Body):
    decision: Literal["approve", "deny", "edit", "abort"]
    digest: str | None = None
    reason: str | None = None
    message: str | None = None
    """deny: the exact text the model receives (the audit keeps `reason`)."""
    arguments: JsonArguments = None
    remember: bool | RememberBody = False
    """approve or deny: decide the tool's later calls in this run alike (true), or the later
    calls a rule selects; revocable (`loopstate forget`)."""


class MessageBody(_Body):
    text: str


class AbortBody(_Body):
    reason: str = "aborted over HTTP"


def answer(result: Answer) -> JSONResponse:
    status, body = result
    return JSONResponse(body, status_code=status, media_type=PROBLEM if status >= 400 else None)


async def load(service: Service, run_id: str) -> RunState:
    check_id(run_id, "run")
    try:
        return await service.store.load(run_id)
    except RunNotFound:
        raise Problem(404, f"no run {run_id!r}") from None
    except RunDamaged as exc:  # damaged: refused in one line, its rows left as they are
        raise Problem(409, f"run {run_id} is damaged: {_line(exc)}") from None


def _line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/api")
    guard = service.guard

    @router.get("/runs")
    async def list_runs(
        request: Request,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        compatible: bool | None = None,
    ) -> dict[str, Any]:
        who = await guard.who(request, "read", None)
        status = check_query(status, "status") or None
        keep = partial(guard.tenancy.visible, who.tenant)
        if compatible is not None:  # judged against the served agents: see `compat`
            return await runs_by_compatibility(service, compatible, status, keep)
        page = await runs_page(service.store, status, check_limit(limit), cursor, keep)
        return {**page, "items": await with_errors(service.store, page["items"])}

    @router.post("/agents/{name}/runs", status_code=202)
    async def start_run(
        request: Request,
        name: str,
        body: StartBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        who = await guard.who(request, "start", None)
        actor = who.name
        if name not in service.runner.agents:
            raise Problem(404, f"no agent named {name!r} is served here")

        async def start() -> Answer:
            return 202, {"run_id": await service.runner.start(name, body.prompt, who.tenant)}

        if idempotency_key is None:
            return answer(await start())
        scope = f"{actor} start {name}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), start))

    @router.get("/runs/{run_id}")
    async def show_run(request: Request, run_id: str) -> dict[str, Any]:
        await guard.identity(request, "read", run_id)
        state = await load(service, run_id)
        view = run_view(state)
        view["pending"] = await explain(service.runner, [(state, p) for p in view["pending"]])
        view["failure_text"] = failure_text(state)
        return view

    @router.get("/approvals")
    async def approvals(
        request: Request,
        run_id: str | None = None,
        tool: str | None = None,
        assignee: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """`assignee=mine`: only the calls a Gate assigned to the asker."""
        who = await guard.who(request, "read", run_id)
        run_id, tool = check_query(run_id, "run_id"), check_query(tool, "tool")
        assignee = check_query(assignee, "assignee")
        page = await approvals_page(
            service.store, run_id, tool, check_limit(limit), cursor,
            keep=partial(guard.tenancy.visible, who.tenant),
            assignee=who.name if assignee == "mine" else assignee,
        )  # fmt: skip
        states = page.pop("states")
        page["items"] = await explain(service.runner, list(zip(states, page["items"], strict=True)))
        return page

    @router.post("/runs/{run_id}/calls/{call_id}/decision")
    async def decide(
        request: Request,
        run_id: str,
        call_id: str,
        body: DecisionBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await guard.identity(request, "decide", run_id)
        check_id(run_id, "run")
        check_id(call_id, "call")
        if not idempotency_key:
            raise Problem(400, "a decision requires an Idempotency-Key header")

        async def record() -> Answer:
            async with service.run_lock(run_id):
                try:  # one round trip on PostgreSQL when nothing is wrong
                    continues = await record_decision(
                        service.store, run_id, call_id, decision_of(body),
                        actor=actor, clock=service.runner.clock, bound=True,
                    )  # fmt: skip
                except RunNotFound:
                    raise Problem(404, f"no run {run_id!r}") from None
                except RunDamaged as exc:
                    raise Problem(409, f"run {run_id} is damaged: {_line(exc)}") from None
                except (DecisionError, RunBusy, RunNotResumable) as exc:
                    raise as_problem(exc) from None
            service.hub.touch(run_id)
            if continues:  # a sub-agent's last decision: the top run of its tree continues
                service.runner.worker.wake()
            return 200, {"run_id": run_id, "call_id": call_id, "decision": body.decision,
                         "actor": actor, "continues": continues}  # fmt: skip

        scope = f"{actor} decide {run_id} {call_id}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), record))

    @router.post("/runs/{run_id}/messages", status_code=202)
    async def message(
        request: Request,
        run_id: str,
        body: MessageBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await guard.identity(request, "message", run_id)
        check_id(run_id, "run")

        async def converse() -> Answer:
            state = await load(service, run_id)
            if state.status not in ("done", "awaiting_input"):
                raise Problem(409, f"run {run_id} is {state.status}: only a run that answered "
                              "or waits for input takes a message")  # fmt: skip
            if not body.text.strip():
                raise Problem(422, "text is empty", errors=[{"field": "text", "message": "empty"}])
            try:
                await service.runner.converse(run_id, body.text, actor)
            except (RunBusy, RunNotResumable, DecisionError) as exc:
                raise as_problem(exc) from None
            return 202, {"run_id": run_id}

        if idempotency_key is None:
            return answer(await converse())
        scope = f"{actor} message {run_id}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), converse))

    @router.post("/runs/{run_id}/abort")
    async def abort(
        request: Request,
        run_id: str,
        body: AbortBody,
        idempotency_key: str | None = Header(None),
    ) -> JSONResponse:
        actor = await guard.identity(request, "abort", run_id)
        check_id(run_id, "run")

        async def stop() -> Answer:
            await load(service, run_id)
            try:
                result = await abort_run(service.store, run_id, body.reason, actor=actor)
            except (RunBusy, RunNotResumable) as exc:
                raise as_problem(exc) from None
            service.hub.touch(run_id)
            return 200, {"run_id": run_id, "status": result.status}

        if idempotency_key is None:
            return answer(await stop())
        scope = f"{actor} abort {run_id}"
        return answer(await service.keys.once(scope, idempotency_key, body.model_dump(), stop))

    @router.post("/runs/{run_id}/pause", status_code=202)
    async def pause(request: Request, run_id: str) -> dict[str, Any]:
        """Ask a running run to stop at its next step boundary (it rests in `paused`); a run
        that is not running stays as it is (`asked: false`). Asking twice asks once."""
        actor = await guard.identity(request, "abort", run_id)  # stopping a run, as abort
        check_id(run_id, "run")
        await load(service, run_id)
        asked = await pause_run(service.store, run_id, actor=actor, clock=service.runner.clock)
        status = (await load(service, run_id)).status
        return {"run_id": run_id, "asked": asked, "status": status}

    return router
