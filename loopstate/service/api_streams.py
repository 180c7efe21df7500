"""The event streams (SSE) and the run diagram.

`GET /api/runs/{run_id}/events`: the run's transitions as stored, each with its `seq` as the
SSE `id`; with `Last-Event-ID: n` the stream starts after transition n, so a client that
reconnects (to this process or another on the same store, after a restart too) gets exactly
what it missed. `GET /api/events`: a `run` event whenever any run is written (created, moved,
a decision or message queued for it), with the store-wide event log's id as the SSE `id`
(see `Store.events`); with `Last-Event-ID: n` it starts after entry n, likewise exact across
processes and restarts. Without one it starts at the log's end: a client loads what it shows
(e.g. `/api/approvals`) when it first connects. A `Last-Event-ID` older than the retained log
(entries after it were pruned) is answered by a `reset` event (`{"pruned_upto", "head"}`, SSE
id: the head): load what you show again, then follow on. A run's stream also
forwards the model's streamed deltas (`text_delta`, `tool_call_delta`) live and without an
id, when this process drives the run: they are never stored. Each stream sends a
keep-alive comment every `ping_s`, and ends after `lifetime_s` with `retry:` set.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from loopstate.engine.errors import DefinitionError
from loopstate.engine.store import RunEvent
from loopstate.engine.streaming import TextDelta, ToolCallDelta
from loopstate.service.api_runs import load
from loopstate.service.feed import Item
from loopstate.service.inputs import event_id
from loopstate.service.problems import Problem
from loopstate.service.service import Service
from loopstate.service.views import transition_view

Delta = TextDelta | ToolCallDelta


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/api")
    guard = service.guard

    @router.get("/runs/{run_id}/events")
    async def run_events(
        request: Request,
        run_id: str,
        last_event_id: str | None = Header(None),
    ) -> EventSourceResponse:
        await guard.identity(request, "read", run_id)
        after = event_id(last_event_id or request.query_params.get("last_event_id")) or 0
        await load(service, run_id)
        return _response(service, _run_stream(service, run_id, after))

    @router.get("/events")
    async def all_events(
        request: Request, last_event_id: str | None = Header(None)
    ) -> EventSourceResponse:
        who = await guard.who(request, "read", None)
        after = event_id(last_event_id or request.query_params.get("last_event_id"))
        return _response(service, _all_stream(service, after, who.tenant))

    @router.get("/runs/{run_id}/diagram.mmd")
    async def diagram_mermaid(request: Request, run_id: str) -> Response:
        await guard.identity(request, "read", run_id)
        text = _diagram(await load(service, run_id), "mermaid")
        return Response(text, media_type="text/plain; charset=utf-8")

    @router.get("/runs/{run_id}/diagram.svg")
    async def diagram_svg(request: Request, run_id: str) -> Response:
        await guard.identity(request, "read", run_id)
        state = await load(service, run_id)
        svg = await asyncio.to_thread(_diagram, state, "svg")
        return Response(svg, media_type="image/svg+xml")

    return router


def _response(service: Service, events: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    return EventSourceResponse(
        events,
        ping=service.streams.ping_s,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        send_timeout=30,
    )


async def _run_stream(service: Service, run_id: str, after: int) -> AsyncIterator[ServerSentEvent]:
    policy = service.streams
    queue = service.hub.subscribe(run_id)
    try:
        yield ServerSentEvent(retry=policy.retry_ms, comment=f"run {run_id}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.lifetime_s
        sent, upto = after, None
        while True:
            state = await service.store.load(run_id)
            for t in state.transitions[sent:upto]:
                data = {**transition_view(run_id, t), "status": state.status}
                yield ServerSentEvent(json.dumps(data), id=str(t.seq), event="transition")
                sent = t.seq
            while isinstance(item := await _next(queue, deadline - loop.time()), Delta):
                yield ServerSentEvent(item.model_dump_json(), event=item.kind)
            if item is None:
                return
            upto = item.seq
    finally:
        service.hub.unsubscribe(run_id, queue)


async def _all_stream(
    service: Service, after: int | None, tenant: str | None
) -> AsyncIterator[ServerSentEvent]:
    """Every run's log entries (of `tenant`'s runs only, when it is set)."""
    policy, hub, visible = service.streams, service.hub, service.guard.tenancy.visible
    queue = hub.subscribe(None)
    try:
        sent, pruned = await hub.follow(queue, after)  # kept from pruning once it is open
        yield ServerSentEvent(retry=policy.retry_ms, comment="all runs")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.lifetime_s
        if pruned is not None:  # what came after `after` is gone: start over, from the end
            reset = {"pruned_upto": pruned, "head": sent}
            yield ServerSentEvent(json.dumps(reset), id=str(sent), event="reset")
        while True:
            while events := await hub.since(sent):
                for e in events:
                    if await visible(tenant, e.run_id):
                        view = json.dumps(_event_view(e))
                        yield ServerSentEvent(view, id=str(e.id), event="run")
                sent = events[-1].id
                hub.sent(queue, sent)
            if await _next(queue, deadline - loop.time()) is None:
                return
            while not queue.empty():  # one look for every notice already queued
                queue.get_nowait()
    finally:
        hub.unsubscribe(None, queue)


async def _next(queue: asyncio.Queue[Item], within: float) -> Item | None:
    if within <= 0:
        return None
    try:
        return await asyncio.wait_for(queue.get(), within)
    except TimeoutError:
        return None


def _event_view(e: RunEvent) -> dict[str, Any]:
    return {"id": e.id, "run_id": e.run_id, "state": e.state, "status": e.status,
            "pending": e.pending, "queued": e.queued, "seq": e.seq,
            "updated_at": e.updated_at}  # fmt: skip


def _diagram(state: Any, fmt: str) -> str | bytes:
    from loopstate.engine.diagram import (
        GraphvizFailed,
        GraphvizNotFound,
        graph_of,
        render,
        run_overlay,
        to_dot,
        to_mermaid,
    )  # fmt: skip
    from loopstate.engine.diagram.fold import folded
    from loopstate.machines import machine_class

    try:
        graph = graph_of(machine_class(state.machine))
    except DefinitionError as exc:
        raise Problem(404, f"no diagram: {exc}") from None
    overlay = run_overlay(state, graph)
    graph = folded(graph, overlay)  # abort/fail from every state: drawn once
    if fmt == "mermaid":
        return to_mermaid(graph, overlay)
    try:
        return render(to_dot(graph, overlay), "svg")
    except (GraphvizNotFound, GraphvizFailed) as exc:
        raise Problem(503, f"no SVG: {exc}") from None
