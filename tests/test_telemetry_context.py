"""A run's trace across suspensions and processes (its trace context kept in its metadata),
runs that are not sampled or have no SDK, and telemetry that is not installed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from model_server import serve, text_reply, tool_call_reply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from telemetry_support import by_name, one, parent_of, provider_for, span_id, team_tools

from loopstate import Agent, Approve, LiteLLMModel, MemoryStore, SQLiteStore
from loopstate.telemetry import OTelHooks


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


async def test_a_resumed_run_continues_its_trace_and_times_the_wait(exporter, tmp_path: Path):
    store = SQLiteStore(tmp_path / "runs.db")
    replies = (tool_call_reply(("c1", "write", {"path": "a.md"})), text_reply("Written."))
    with serve(*replies) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        first = OTelHooks(tracer_provider=provider_for(exporter))
        suspended = await Agent(model, team_tools(), store=store, hooks=[first]).run("go")
        assert suspended.status == "awaiting_approval"
        # A second OTelHooks: nothing shared in memory, as in another process.
        provider = provider_for(exporter)
        later = OTelHooks(tracer_provider=provider)
        agent = Agent(model, team_tools(), store=store, hooks=[later])
        with provider.get_tracer("service").start_as_current_span("POST /decide") as request:
            result = await agent.resume(suspended.run_id, {"c1": Approve()})
    assert result.status == "done"
    spans = [s for s in exporter.get_finished_spans() if s.name != "POST /decide"]
    start, resume = by_name(spans, "invoke_agent agent")
    assert [link.context for link in resume.links] == [request.get_span_context()]
    assert start.attributes["loopstate.segment"] == "start"
    assert resume.attributes["loopstate.segment"] == "resume"
    assert {s.context.trace_id for s in spans} == {start.context.trace_id}
    assert parent_of(resume) == span_id(start)
    state = await store.load(result.run_id)
    assert state.metadata["trace_context"]["traceparent"].split("-")[2] == format(
        span_id(start), "016x"
    )
    approval = one(spans, "loopstate.approval")
    asked = max(t.at for t in state.transitions if t.target == "awaiting_approval")
    decided_at = state.calls[0].decided_at
    assert parent_of(approval) == span_id(start)
    assert approval.start_time == int(asked * 1e9)
    assert (approval.end_time - approval.start_time) / 1e9 == pytest.approx(decided_at - asked)


async def test_a_run_stored_without_a_trace_context_resumes_and_starts_one(exporter, tmp_path):
    store = SQLiteStore(tmp_path / "runs.db")
    replies = (tool_call_reply(("c1", "write", {"path": "a.md"})), text_reply("Written."))
    with serve(*replies) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        suspended = await Agent(model, team_tools(), store=store).run("go")
        assert "trace_context" not in (await store.load(suspended.run_id)).metadata
        hooks = OTelHooks(tracer_provider=provider_for(exporter))
        agent = Agent(model, team_tools(), store=store, hooks=[hooks])
        result = await agent.resume(suspended.run_id, {"c1": Approve()})
    assert result.status == "done"
    resume = one(exporter.get_finished_spans(), "invoke_agent agent")
    assert resume.parent is None
    kept = (await store.load(result.run_id)).metadata["trace_context"]["traceparent"]
    assert kept.split("-")[1] == format(resume.context.trace_id, "032x")


async def test_a_run_that_is_not_sampled_records_nothing_but_keeps_its_trace(tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SQLiteStore(tmp_path / "runs.db")
    with serve(tool_call_reply(("c1", "write", {"path": "a.md"}))) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        hooks = OTelHooks(tracer_provider=provider)
        result = await Agent(model, team_tools(), store=store, hooks=[hooks]).run("go")
    assert result.status == "awaiting_approval"
    assert exporter.get_finished_spans() == ()
    kept = (await store.load(result.run_id)).metadata["trace_context"]["traceparent"]
    trace_id, flags = kept.split("-")[1], int(kept.split("-")[3], 16)
    assert int(trace_id, 16) != 0  # a valid context, not sampled: a resume stays unsampled
    assert flags & 1 == 0


async def test_without_an_sdk_tracing_keeps_nothing_with_the_run():
    from opentelemetry.trace import NoOpTracerProvider

    store = MemoryStore()
    with serve(text_reply("Hi.")) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        hooks = OTelHooks(tracer_provider=NoOpTracerProvider())
        result = await Agent(model, [], store=store, hooks=[hooks]).run("go")
    assert result.status == "done"
    assert "trace_context" not in (await store.load(result.run_id)).metadata


HIDDEN = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
from loopstate import Agent, MemoryStore, ScriptedModel
print(Agent(ScriptedModel(["hi"]), store=MemoryStore()).run_sync("go").status)
try:
    import loopstate.telemetry
except ModuleNotFoundError as exc:
    print(exc)
"""


def test_without_the_extra_runs_work_and_telemetry_says_what_to_install():
    out = subprocess.run([sys.executable, "-c", HIDDEN], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "done",
        "loopstate.telemetry needs OpenTelemetry's API: pip install 'loopstate[otel]'",
    ]
