"""Streaming through LiteLLMModel over real HTTP, in the OpenAI and Anthropic formats: text and
tool-call argument deltas, usage and cost as without streaming, and every way a stream goes
wrong (cut short cleanly, dropped, stalled, cancelled) ending the run as an error or a
cancellation, never as a short answer, with the upstream connection closed."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from model_server import ModelServer, cut_stream, paced, serve, text_reply, tool_call_reply
from support import forking

from loopstate import Agent, LiteLLMModel, MemoryStore, UserMessage, tool
from loopstate.engine.model import ModelRequest
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.streaming import TextDelta, ToolCallDelta

FORMATS = ["openai", "anthropic"]
ANSWER = "The capital of France is Paris, of course."


def model_for(fmt: str, server: ModelServer, **settings: Any) -> LiteLLMModel:
    if fmt == "openai":
        return LiteLLMModel("openai/gpt-4o-mini", api_base=server.openai_base, api_key="sk-test",
                            **settings)  # fmt: skip
    return LiteLLMModel("anthropic/claude-sonnet-4-5", api_base=server.url, api_key="sk-ant-test",
                        max_tokens=1024, **settings)  # fmt: skip


@tool
def lookup(city: str, unit: str = "c") -> str:
    """Look up a city's weather."""
    return f"sunny in {city}"


class Listener:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[tuple[int, str | None, str | None, str]] = []

    async def text(self, text: str) -> None:
        self.texts.append(text)

    async def tool_call(self, index: int, cid: str | None, name: str | None, args: str) -> None:
        self.calls.append((index, cid, name, args))

    def new_attempt(self) -> None:
        raise AssertionError("no retry here")


REQUEST = ModelRequest(messages=(UserMessage(content="Capital of France?"),), step=1)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_streamed_reply_is_the_same_reply_usage_and_cost_as_the_plain_one(fmt: str) -> None:
    with serve(text_reply(ANSWER, usage=(21, 9)), text_reply(ANSWER, usage=(21, 9))) as server:
        model = model_for(fmt, server)
        plain = await model.complete(REQUEST)
        listener = Listener()
        streamed = await model.stream(REQUEST, listener)
    assert server.bodies[1]["stream"] is True
    assert len(listener.texts) > 3
    assert "".join(listener.texts) == ANSWER
    assert streamed.message == plain.message
    assert (streamed.usage.prompt_tokens, streamed.usage.completion_tokens) == (21, 9)
    assert streamed.usage.cost_usd == pytest.approx(plain.usage.cost_usd)
    assert streamed.usage.cost_usd


@pytest.mark.parametrize("fmt", FORMATS)
async def test_two_parallel_tool_calls_stream_their_arguments_and_run(fmt: str) -> None:
    calls = (("call_a", "lookup", {"city": "Paris", "unit": "c"}),
             ("call_b", "lookup", {"city": "Oslo", "unit": "f"}))  # fmt: skip
    with serve(tool_call_reply(*calls, text="Checking both."), text_reply("Both sunny.")) as server:
        stream = Agent(model_for(fmt, server), [lookup], store=MemoryStore()).stream("weather?")
        events = [e async for e in stream]
    deltas = [e for e in events if isinstance(e, ToolCallDelta) and e.step == 1]
    for index, (cid, name, arguments) in enumerate(calls):
        pieces = [d for d in deltas if d.index == index]
        assert (pieces[0].call_id, pieces[0].tool) == (cid, name)
        assert sum(bool(p.arguments) for p in pieces) > 1
        assert json.loads("".join(p.arguments for p in pieces)) == arguments
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Checking both.Both sunny."
    result = stream.result
    assert (result.status, result.output) == ("done", "Both sunny.")
    results = [m.content for m in result.messages if m.role == "tool"]
    assert results == ["sunny in Paris", "sunny in Oslo"]
    assert result.usage.prompt_tokens == 22
    assert result.usage.cost_usd


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", ["clean", "drop"])
async def test_a_stream_cut_short_fails_the_run_instead_of_a_short_answer(
    fmt: str, how: str
) -> None:
    # paced: the first pieces reach the reader before the end, whatever the transport buffers
    cut = cut_stream(paced(text_reply(ANSWER), 0.01), 6, how)  # type: ignore[arg-type]
    with serve(cut) as server:
        stream = Agent(model_for(fmt, server), store=MemoryStore()).stream("Capital?")
        events = [e async for e in stream]
    assert any(isinstance(e, TextDelta) for e in events)  # it had begun
    result = stream.result
    assert (result.status, result.output) == ("failed", None)
    assert result.error is not None
    assert result.error.startswith("ModelError")
    if how == "clean":
        assert "without a finish reason" in result.error


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_stalled_stream_fails_by_its_deadline_and_closes_the_connection(fmt: str) -> None:
    with serve(text_reply(ANSWER), cut_stream(text_reply(ANSWER), 4, "stall")) as server:
        agent = Agent(model_for(fmt, server, stall_s=0.5), store=MemoryStore())
        # warmed first: litellm's first call in a process sets itself up (imports, clients)
        # in a thread, which on a slow machine alone can outlast the 0.5 s deadline
        assert (await agent.run("Capital?")).status == "done"
        started = time.monotonic()
        stream = agent.stream("Capital?")
        _ = [e async for e in stream]
        elapsed = time.monotonic() - started
        await asyncio.to_thread(server.wait_for_disconnects, 1)
    assert stream.result.status == "failed"
    assert "stalled" in (stream.result.error or "")
    assert elapsed < 10


@pytest.mark.parametrize("fmt", FORMATS)
async def test_cancelling_a_streamed_run_closes_the_upstream_connection(fmt: str) -> None:
    store = MemoryStore()
    with serve(paced(text_reply(" ".join(["word"] * 200)), 0.02)) as server:
        stream = Agent(model_for(fmt, server), store=store).stream("Talk.")
        async with stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
        await asyncio.to_thread(server.wait_for_disconnects, 1)
    (summary,) = await store.list_runs()
    stored = await store.load(summary.run_id)
    assert (stored.state, stored.stop_reason, stored.output) == ("thinking", None, None)


CHILD = """
import asyncio, sys
from loopstate import Agent, LiteLLMModel
from loopstate.engine.stores.sqlite import SQLiteStore

async def main() -> None:
    model = LiteLLMModel("openai/gpt-4o-mini", api_base=sys.argv[1], api_key="sk-test")
    agent = Agent(model, store=SQLiteStore(sys.argv[2]), ids=lambda: "r1", lease_s=0.5)
    async for event in agent.stream("Tell me a story."):
        if event.kind == "text_delta":
            print(event.step, event.attempt, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_process_killed_mid_stream_saves_nothing_partial_and_resumes_as_a_new_attempt(
    tmp_path: Any,
) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    db = tmp_path / "runs.db"
    # A few distinct pieces (as a real stream's are), then nothing until the child is gone:
    # however slowly the machine runs, the child is killed mid-stream, never after its end.
    words = " ".join(f"word{n}" for n in range(40))
    story = cut_stream(text_reply(words), 6, "stall")
    with serve(story, text_reply("A short story.")) as server:
        with forking.Popen(
            [sys.executable, "child.py", server.openai_base, str(db)], cwd=tmp_path,
            stdout=subprocess.PIPE,
        ) as child:  # fmt: skip
            assert child.stdout is not None
            try:  # the child prints once it has a piece of the reply
                step, dead_attempt = (await asyncio.to_thread(child.stdout.readline)).split()
            finally:
                child.send_signal(signal.SIGKILL)
                await asyncio.to_thread(child.wait)
        await asyncio.to_thread(server.wait_for_disconnects, 1)  # the stream died with it
        await asyncio.sleep(0.6)  # the lease the child took (0.5 s) has expired: no waiting on it
        store = SQLiteStore(db)
        stored = await store.load("r1")
        assert (stored.state, [m.role for m in stored.messages]) == ("thinking", ["user"])
        agent = Agent(model_for("openai", server), store=store)
        stream = agent.stream_resume("r1")
        deltas = [e async for e in stream if isinstance(e, TextDelta)]
    assert {d.step for d in deltas} == {int(step)} == {1}
    assert {d.attempt for d in deltas} != {dead_attempt.decode()}
    assert "".join(d.text for d in deltas) == "A short story."
    assert (stream.result.status, stream.result.output) == ("done", "A short story.")
