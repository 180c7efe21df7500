"""Streaming a run: deltas among the run's events, the same stored run as without streaming,
approvals surfacing with their arguments, a resumed run's stream going on, cancellation
recorded, a retried step told apart, a recording re-streamed. (Over real HTTP: see
test_streaming_over_http.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support import charge
from test_durable_decisions import stored_rows

from loopstate import Agent, Approve, Hooks, MemoryStore, ModelError, ScriptedModel, tool
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.retry import RetryingModel, RetryPolicy
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.recording.recorder import Recorder
from loopstate.engine.recording.replay import ReplayModel
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.streaming import DeltaListener, TextDelta, ToolCallDelta


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


def text_of(events: list[Any], step: int | None = None) -> str:
    return "".join(
        e.text for e in events if e.kind == "text_delta" and (step is None or e.step == step)
    )


async def test_a_streamed_run_yields_text_deltas_among_its_events_and_then_its_result() -> None:
    agent = Agent(ScriptedModel(["The answer is 42."]), store=MemoryStore())
    stream = agent.stream("What is it?")
    events = await collect(stream)
    kinds = [e.kind for e in events]
    assert text_of(events) == "The answer is 42."
    first, last = kinds.index("text_delta"), len(kinds) - 1 - kinds[::-1].index("text_delta")
    assert kinds[first - 1] == "model_request"
    assert kinds[last + 1] == "model_response"
    assert kinds[-1] == "run_finished"
    assert {(e.run_id, e.step) for e in events if e.kind == "text_delta"} == {
        (stream.result.run_id, 1)
    }
    assert (stream.result.status, stream.result.output) == ("done", "The answer is 42.")


async def test_two_parallel_tool_calls_stream_their_arguments_in_pieces() -> None:
    script = [calls(call("lookup", {"key": "alpha"}), call("lookup", {"key": "beta"})), "ok"]
    events = await collect(Agent(ScriptedModel(script), [lookup], store=MemoryStore()).stream("go"))
    deltas = [e for e in events if e.kind == "tool_call_delta"]
    by_index: dict[int, list[ToolCallDelta]] = {}
    for d in deltas:
        by_index.setdefault(d.index, []).append(d)
    assert sorted(by_index) == [0, 1]
    for index, key in ((0, "alpha"), (1, "beta")):
        pieces = by_index[index]
        assert len(pieces) > 1
        assert (pieces[0].call_id, pieces[0].tool) == (f"call_1_{index + 1}", "lookup")
        assert json.loads("".join(p.arguments for p in pieces)) == {"key": key}


async def test_a_streamed_run_stores_exactly_what_the_same_run_unstreamed_stores(
    tmp_path: Path,
) -> None:
    script = [call("lookup", {"key": "k"}), "found it"]
    for name, streamed in (("plain", False), ("streamed", True)):
        recorder = Recorder(tmp_path / f"{name}.jsonl")
        agent = Agent(ScriptedModel(script), [lookup], store=SQLiteStore(tmp_path / f"{name}.db"),
                      ids=lambda: "r1", clock=lambda: 1.7e9, hooks=[recorder])  # fmt: skip
        if streamed:
            await collect(agent.stream("go"))
        else:
            await agent.run("go")
    assert stored_rows(tmp_path / "plain.db") == stored_rows(tmp_path / "streamed.db")
    assert (tmp_path / "plain.jsonl").read_text() == (tmp_path / "streamed.jsonl").read_text()


async def test_an_approval_surfaces_with_its_arguments_and_the_resumed_stream_goes_on() -> None:
    agent = Agent(ScriptedModel([call("charge", {"amount": 5}), "Charged."]), [charge],
                  store=MemoryStore())  # fmt: skip
    first = agent.stream("charge 5")
    events = await asyncio.wait_for(collect(first), 5)
    asked = [e for e in events if e.kind == "approval_requested"]
    assert [(a.tool, a.arguments) for a in asked] == [("charge", {"amount": 5})]
    assert events[-1].kind == "run_suspended"
    assert first.result.status == "awaiting_approval"

    again = agent.stream_resume(first.result.run_id, {asked[0].call_id: Approve()})
    resumed = await asyncio.wait_for(collect(again), 5)
    kinds = [e.kind for e in resumed]
    assert kinds.index("tool_approval") < kinds.index("tool_started") < kinds.index("text_delta")
    assert text_of(resumed) == "Charged."
    assert again.result.status == "done"


async def test_a_conversation_goes_on_streamed() -> None:
    agent = Agent(ScriptedModel(["Hello.", "Still here."]), store=MemoryStore())
    first = await agent.run("hi")
    stream = agent.stream_resume(first.run_id, message="are you there?")
    events = await collect(stream)
    assert text_of(events) == "Still here."
    assert stream.result.run_id == first.run_id
    assert [e.step for e in events if e.kind == "text_delta"] == [2, 2]


class Deltas(Hooks):
    def __init__(self) -> None:
        self.seen: list[TextDelta | ToolCallDelta] = []

    async def on_text_delta(self, delta: TextDelta) -> None:
        self.seen.append(delta)

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        self.seen.append(delta)


class CountingModel(ScriptedModel):
    streamed = 0

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        self.streamed += 1
        return await super().stream(request, listener)


async def test_delta_hooks_make_the_step_stream_and_without_a_listener_it_does_not() -> None:
    hooks = Deltas()
    model = CountingModel(["one two"])
    await Agent(model, hooks=[hooks], store=MemoryStore()).run("go")
    assert [d.text for d in hooks.seen if isinstance(d, TextDelta)] == ["one", " two"]
    quiet = CountingModel(["one two"])
    await Agent(quiet, hooks=[Hooks()], store=MemoryStore()).run("go")
    assert (model.streamed, quiet.streamed) == (1, 0)


class Flaky(ScriptedModel):
    """Streams half of its answer, then fails with a retryable error, once."""

    failed = False

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        if not self.failed:
            self.failed = True
            await listener.text("partial")
            raise ModelError("dropped", error_type="connection")
        return await super().stream(request, listener)


async def test_a_retried_step_streams_as_a_new_attempt_so_stale_text_can_be_dropped() -> None:
    async def no_wait(_: float) -> None:
        return None

    model = RetryingModel(Flaky(["fresh text"]), RetryPolicy(attempts=2), sleep=no_wait)
    stream = Agent(model, store=MemoryStore()).stream("go")
    deltas = [e for e in await collect(stream) if e.kind == "text_delta"]
    attempts = list(dict.fromkeys(d.attempt for d in deltas))
    assert len(attempts) == 2
    assert [d.text for d in deltas if d.attempt == attempts[-1]] == ["fresh", " text"]
    assert stream.result.output == "fresh text"


class Endless(ScriptedModel):
    """Streams a first word, then waits until it is cancelled."""

    def __init__(self) -> None:
        super().__init__([])
        self.cancelled = asyncio.Event()

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        await listener.text("Once")
        try:
            await asyncio.sleep(60)
        finally:
            self.cancelled.set()
        raise AssertionError("not cancelled")


async def test_closing_a_stream_interrupts_the_run_and_leaves_it_to_resume() -> None:
    store, model = MemoryStore(), Endless()
    stream = Agent(model, store=store).stream("tell me a story")
    async with stream:
        async for event in stream:
            if event.kind == "text_delta":
                break
    assert model.cancelled.is_set()
    runs = await store.list_runs()
    stored = await store.load(runs[0].run_id)
    assert (stored.status, stored.state, stored.stop_reason) == ("running", "thinking", None)
    with pytest.raises(RuntimeError, match="has not ended"):
        _ = stream.result


async def test_a_recorded_run_replays_as_a_stream_with_no_model(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    await Agent(ScriptedModel([call("lookup", {"key": "k"}), "It is k."]), [lookup],
                hooks=[Recorder(cassette)], store=MemoryStore()).run("find k")  # fmt: skip
    replayed = Agent(ReplayModel(cassette), [lookup], store=MemoryStore())
    events = await collect(replayed.stream("find k"))
    assert text_of(events, step=2) == "It is k."
    assert any(e.kind == "tool_call_delta" and e.tool == "lookup" for e in events)
