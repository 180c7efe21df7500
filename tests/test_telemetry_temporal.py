"""A run on Temporal joins its caller's trace through temporalio's tracing interceptor
(`loopstate.telemetry.temporal_interceptors`): the workflow's start, the decision's update and
the activities (model calls, tools) of the worker built on the same client."""

from __future__ import annotations

import uuid
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporal_agents import agents
from temporal_support import wait_pending

from loopstate.telemetry import temporal_interceptors
from loopstate.temporal import TemporalRuns, agent_worker


async def test_a_temporal_run_and_its_activities_are_in_the_callers_trace(
    temporal_address: str, tmp_path: Path
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    queue = f"q-{uuid.uuid4().hex[:8]}"
    runs = await TemporalRuns.connect(
        temporal_address, task_queue=queue, interceptors=temporal_interceptors(provider)
    )
    caller = provider.get_tracer("test")
    async with agent_worker(runs.client, agents(tmp_path), task_queue=queue):
        with caller.start_as_current_span("request") as request:
            run_id = await runs.start("writer", "note hello")
            [pending] = await wait_pending(runs, run_id)
            await runs.approve(run_id, pending.call_id)
            result = await runs.result(run_id)
    assert result.status == "done"
    spans = exporter.get_finished_spans()
    names = {s.name for s in spans}
    assert {
        "StartWorkflow:loopstate.agent",
        "HandleUpdate:decide",
        "RunActivity:loopstate.model",
        "RunActivity:loopstate.tool",
        "CompleteWorkflow:loopstate.agent",
    } <= names, names
    assert {s.context.trace_id for s in spans} == {request.get_span_context().trace_id}
