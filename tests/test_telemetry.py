"""OpenTelemetry traces of runs (`loopstate.telemetry.OTelHooks`), read back from the SDK's
in-memory exporter: span names, kinds, nesting and attributes after the GenAI conventions, the
machine's transitions, approvals timed from request to decision, sub-agents under the call
that delegated, flow phases, content capture. The model answers over real HTTP (or is
scripted where only its words matter)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
import structlog
from model_server import error_reply, openai_body, raw_reply, serve, text_reply, tool_call_reply
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from telemetry_support import by_name, decide, one, parent_of, provider_for, span_id, team_tools

from loopstate import Agent, Approve, LiteLLMModel, MemoryStore, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.telemetry import OTelHooks, add_trace_context


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


SECRET = "the-prompt-no-backend-may-see"


ARGUMENT = "argument-no-backend-may-see"


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
    # the server's reply id, through litellm (the first call) and the fast path (the second)
    assert first.attributes["gen_ai.response.id"] == "chatcmpl-test"
    assert second.attributes["gen_ai.response.id"] == "chatcmpl-test"

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
    body["id"] = "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
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
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"


class Yielding:
    """A scripted model that yields to the event loop once per call, as a real one does: runs
    gathered together are then in flight together."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.name = "openai/test-model"

    async def complete(self, request):
        await asyncio.sleep(0)
        return await self.inner.complete(request)


async def test_runs_in_flight_together_on_one_hooks_object_keep_their_spans_apart(exporter):
    hooks = OTelHooks(tracer_provider=provider_for(exporter))

    def agent() -> Agent:
        script = [call("lookup", {"key": "a"}), call("lookup", {"key": "b"}), "done"]
        return Agent(
            Yielding(ScriptedModel(script)), team_tools(), store=MemoryStore(), hooks=[hooks]
        )

    results = await asyncio.gather(*(agent().run("go") for _ in range(5)))
    assert {r.status for r in results} == {"done"}
    spans = exporter.get_finished_spans()
    roots = {s.attributes["loopstate.run_id"]: s for s in by_name(spans, "invoke_agent agent")}
    assert set(roots) == {r.run_id for r in results}
    for run_id, root in roots.items():
        inside = [s for s in spans if parent_of(s) == span_id(root)]
        assert sorted(s.name for s in inside) == [
            "chat test-model", "chat test-model", "chat test-model",
            "execute_tool lookup", "execute_tool lookup",
        ]  # fmt: skip
        assert {s.context.trace_id for s in inside} == {root.context.trace_id}
        assert all(s.attributes.get("loopstate.run_id", run_id) == run_id for s in inside)
    assert len({r.context.trace_id for r in roots.values()}) == 5
