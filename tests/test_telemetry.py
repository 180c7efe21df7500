"""OpenTelemetry traces of runs (`loopstate.telemetry.OTelHooks`), read back from the SDK's
in-memory exporter: span names, kinds, nesting and attributes after the GenAI conventions, the
machine's transitions, approvals timed from request to decision, sub-agents under the call
that delegated, and one trace across a suspension. The model answers over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from model_server import error_reply, openai_body, raw_reply, serve, text_reply, tool_call_reply
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from loopstate import Agent, Approve, Deny, LiteLLMModel, MemoryStore, SQLiteStore, tool
from loopstate.telemetry import OTelHooks, add_trace_context

SECRET = "the-prompt-no-backend-may-see"
ARGUMENT = "argument-no-backend-may-see"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def provider_for(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def team_tools() -> list:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    @tool(needs_approval=True)
    def write(path: str) -> str:
        """Write a file."""
        return f"wrote {path}"

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    return [lookup, write, delete]


async def decide(requests):
    return {r.call_id: Approve() if r.tool == "write" else Deny("not today") for r in requests}


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def run_team(exporter: InMemorySpanExporter, **hooks_options):
    hooks = OTelHooks(tracer_provider=provider_for(exporter), **hooks_options)
    store = MemoryStore()
    replies = (
        tool_call_reply(
            ("c1", "lookup", {"key": ARGUMENT}),
            ("c2", "write", {"path": "notes.md"}),
            ("c3", "delete", {"path": "notes.md"}),
            ("c4", "writer", {"task": "a paragraph"}),
        ),
        text_reply("A paragraph."),  # the sub-agent's one model call
        text_reply("Done."),
    )
    with serve(*replies) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        writer = Agent(model, [], store=store, hooks=[hooks])
        delegate = writer.as_tool(name="writer", description="Writes paragraphs.")
        agent = Agent(model, [*team_tools(), delegate], store=store, approver=decide, hooks=[hooks])
        result = await agent.run(SECRET)
    assert result.status == "done", result.error
    return result, exporter.get_finished_spans(), store


async def test_a_run_is_one_trace_of_agent_model_and_tool_spans(exporter):
    result, spans, _store = await run_team(exporter)
    root = one(spans, "invoke_agent agent")
    assert root.parent is None
    assert root.kind == SpanKind.INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == result.run_id
    assert root.attributes["loopstate.status"] == "done"
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}

    chats = [s for s in by_name(spans, "chat test-model") if parent_of(s) == span_id(root)]
    assert len(chats) == 2
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.kind == SpanKind.CLIENT
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "test-model"
    assert first.attributes["gen_ai.response.model"] == "test-model"
    assert first.attributes["gen_ai.usage.input_tokens"] == 11
    assert first.attributes["gen_ai.usage.output_tokens"] == 7
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    tools = {s.name: s for s in spans if s.name.startswith("execute_tool")}
    assert set(tools) == {"execute_tool lookup", "execute_tool write", "execute_tool writer"}
    for span in tools.values():
        assert parent_of(span) == span_id(root)
        assert span.kind == SpanKind.INTERNAL
        assert span.attributes["loopstate.tool.outcome"] == "succeeded"
    assert tools["execute_tool write"].attributes["gen_ai.tool.call.id"] == "c2"
    assert tools["execute_tool write"].attributes["gen_ai.tool.name"] == "write"


async def test_a_sub_agent_run_is_a_child_of_the_call_that_delegated(exporter):
    _, spans, _ = await run_team(exporter)
    call = one(spans, "execute_tool writer")
    child = one(spans, "invoke_agent writer")
    assert parent_of(child) == span_id(call)
    assert child.attributes["gen_ai.agent.name"] == "writer"
    (chat,) = [s for s in spans if parent_of(s) == span_id(child)]
    assert chat.name == "chat test-model"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)


async def test_each_transition_is_an_event_of_the_run_span(exporter):
    result, spans, _store = await run_team(exporter)
    root = one(spans, "invoke_agent agent")
    events = [e for e in root.events if e.name == "loopstate.transition"]
    assert [
        (e.attributes["loopstate.transition.seq"], e.attributes["loopstate.transition.from"],
         e.attributes["loopstate.transition.to"], e.attributes["loopstate.transition.event"])
        for e in events
    ] == [(t.seq, t.source, t.target, t.event) for t in result.transitions]  # fmt: skip
    decided = next(e for e in events if e.attributes["loopstate.transition.event"] == "decided")
    assert decided.attributes["loopstate.transition.actor"] == "approver"


async def test_an_approval_span_lasts_from_request_to_decision(exporter):
    result, spans, store = await run_team(exporter)
    root = one(spans, "invoke_agent agent")
    approvals = {
        s.attributes["gen_ai.tool.call.id"]: s for s in by_name(spans, "loopstate.approval")
    }
    assert set(approvals) == {"c2", "c3"}
    assert all(parent_of(s) == span_id(root) for s in approvals.values())
    write, delete = approvals["c2"], approvals["c3"]
    assert write.attributes["loopstate.approval.decision"] == "approve"
    assert delete.attributes["loopstate.approval.decision"] == "deny"
    assert delete.attributes["loopstate.approval.reason"] == "not today"
    assert write.attributes["loopstate.approval.actor"] == "approver"
    asked = next(e for e in result.events if e.kind == "approval_requested" and e.call_id == "c2")
    state = await store.load(result.run_id)
    decided_at = next(c for c in state.calls if c.call_id == "c2").decided_at
    wait = decided_at - asked.at
    assert write.attributes["loopstate.approval.wait_s"] == pytest.approx(wait)
    assert (write.end_time - write.start_time) / 1e9 == pytest.approx(wait, abs=1e-6)
    assert not [s for s in spans if s.name == "execute_tool delete"]  # denied: never ran


async def test_no_prompt_or_argument_text_is_recorded_unless_opted_in(exporter, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    _, spans, _ = await run_team(exporter)
    recorded = json.dumps([dict(s.attributes) for s in spans], default=str)
    recorded += json.dumps([dict(e.attributes) for s in spans for e in s.events], default=str)
    assert SECRET not in recorded
    assert ARGUMENT not in recorded
    assert "gen_ai.input.messages" not in recorded


async def test_content_is_recorded_when_the_convention_setting_opts_in(exporter, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    _, spans, _ = await run_team(exporter)
    first = min(by_name(spans, "chat test-model"), key=lambda s: s.start_time)
    assert SECRET in first.attributes["gen_ai.input.messages"]
    assert "lookup" in first.attributes["gen_ai.output.messages"]
    lookup = one(spans, "execute_tool lookup")
    assert ARGUMENT in lookup.attributes["gen_ai.tool.call.arguments"]
    assert lookup.attributes["gen_ai.tool.call.result"] == f"value of {ARGUMENT}"


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


async def test_log_lines_carry_the_trace_and_span_ids_of_the_run(exporter):
    captured = structlog.testing.LogCapture()
    structlog.configure(processors=[add_trace_context, captured])
    try:
        await run_team(exporter)
    finally:
        structlog.reset_defaults()
    spans = exporter.get_finished_spans()
    root = one(spans, "invoke_agent agent")
    finished = [e for e in captured.entries if e["event"] == "run_finished"]
    assert finished
    assert finished[-1]["trace_id"] == format(root.context.trace_id, "032x")
    assert finished[-1]["span_id"] == format(span_id(root), "016x")


def test_importing_loopstate_imports_no_opentelemetry():
    code = "import sys, loopstate; print(sorted(m for m in sys.modules if 'opentelemetry' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_flows_phases_are_spans_and_their_agents_runs_nest_in_them(exporter, tmp_path):
    from test_flow_agent_phases import approve_all, draft, facts, review, team

    from loopstate.machines.gauntlet import gauntlet_flow

    hooks = OTelHooks(tracer_provider=provider_for(exporter))
    models = team(draft(), review(True), facts(True))
    flow = gauntlet_flow(
        models=models, workspace=tmp_path, store=MemoryStore(), approver=approve_all
    )
    result = await flow.clone(hooks=[hooks]).run("Explain tides", data={"brief": "tides"})
    assert result.status == "done"
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    assert root.name.startswith("invoke_agent ")
    phases = sorted(
        (s for s in spans if s.name.startswith("loopstate.phase ")), key=lambda s: s.start_time
    )
    assert [p.name for p in phases] == [
        "loopstate.phase write",
        "loopstate.phase style_review",
        "loopstate.phase fact_review",
    ]
    for phase in phases:
        assert parent_of(phase) == span_id(root)
        name = phase.attributes["loopstate.phase"]
        (agent,) = [s for s in spans if parent_of(s) == span_id(phase)]
        assert agent.name == f"invoke_agent {name}"
        assert agent.attributes["loopstate.status"] == "done"
        inside = {s.name.split()[0] for s in spans if parent_of(s) == span_id(agent)}
        assert inside - {"loopstate.approval"} == {"chat", "execute_tool"}  # write is gated


async def test_a_failed_model_call_is_an_error_span_and_ends_the_run_span_failed(exporter):
    hooks = OTelHooks(tracer_provider=provider_for(exporter))
    with serve(error_reply(400)) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        result = await Agent(model, [], store=MemoryStore(), hooks=[hooks]).run("go")
    assert result.status == "failed"
    spans = exporter.get_finished_spans()
    chat, run = one(spans, "chat test-model"), one(spans, "invoke_agent agent")
    assert parent_of(chat) == span_id(run)
    for span in (chat, run):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == result.error.split(":")[0]
    assert run.attributes["loopstate.status"] == "failed"


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


async def test_an_approval_span_names_the_decision_it_remembers_and_the_one_it_came_from(
    exporter,
):
    hooks = OTelHooks(tracer_provider=provider_for(exporter))

    async def approve_and_remember(requests):
        return {r.call_id: Approve(remember=True) for r in requests}

    replies = (
        tool_call_reply(("c1", "write", {"path": "a.md"})),
        tool_call_reply(("c2", "write", {"path": "b.md"})),
        text_reply("Both written."),
    )
    with serve(*replies) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        agent = Agent(
            model, team_tools(), store=MemoryStore(), approver=approve_and_remember, hooks=[hooks]
        )
        assert (await agent.run("write both")).status == "done"
    spans = by_name(exporter.get_finished_spans(), "loopstate.approval")
    approvals = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in spans}
    assert approvals["c1"]["loopstate.approval.remembered"] == "write"
    assert (
        approvals["c2"]["loopstate.approval.remembered"] == "remembered:write (given by approver)"
    )
    assert approvals["c2"]["loopstate.approval.decision"] == "approve"
    assert approvals["c2"]["loopstate.approval.wait_s"] == 0.0  # it waited for nobody


async def test_cached_and_reasoning_tokens_and_the_answering_model_are_recorded(exporter):
    body = openai_body(text_reply("Thought it through."), "o3-mini-2025-01-31")
    body["usage"] |= {
        "prompt_tokens": 120,
        "completion_tokens": 40,
        "total_tokens": 160,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    hooks = OTelHooks(tracer_provider=provider_for(exporter))
    with serve(raw_reply(body)) as server:
        model = LiteLLMModel("openai/o3-mini", api_base=server.openai_base, api_key="k")
        result = await Agent(model, [], store=MemoryStore(), hooks=[hooks]).run("think")
    assert result.status == "done"
    chat = one(exporter.get_finished_spans(), "chat o3-mini")
    assert chat.attributes["gen_ai.request.model"] == "o3-mini"
    assert chat.attributes["gen_ai.response.model"] == "o3-mini-2025-01-31"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 120
    assert chat.attributes["gen_ai.usage.output_tokens"] == 40
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert chat.attributes["gen_ai.usage.reasoning.output_tokens"] == 30
