"""Provider data across processes and models, and model failures a caller can act on,
over real HTTP to a model server on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import provider_replies as pr
import pytest
from model_server import dropped_connection, raw_reply, serve
from support import forking, make_tools
from test_providers_over_http import claude, compatible

from loopstate import Agent, Approve
from loopstate.engine.errors import ModelError
from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest
from loopstate.engine.models.retry import RetryingModel, RetryPolicy
from loopstate.engine.stores.sqlite import SQLiteStore

CHILD = Path(__file__).with_name("provider_child.py")


def gated_thinking_turn() -> dict[str, object]:
    body = pr.anthropic_thinking_tool_use()
    body["content"][-1] = {  # type: ignore[index]
        "type": "tool_use",
        "id": "toolu_01W",
        "name": "write_file",
        "input": {"path": "a.md", "content": "x"},
    }
    return body


async def test_a_resumed_run_in_another_process_still_sends_the_thinking_block(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    _, tools = make_tools()
    with serve(raw_reply(gated_thinking_turn()), raw_reply(pr.anthropic_text("Written."))) as s:
        suspended = await Agent(claude(s), tools, store=SQLiteStore(db)).run("Write a.md")
        assert [p.call_id for p in suspended.pending] == ["toolu_01W"]
        child = forking.run(
            [sys.executable, str(CHILD), db, s.url, suspended.run_id, "toolu_01W"],
            capture_output=True,
            text=True,
            timeout=300,  # a margin for a stuck child (litellm alone: ~20 s on a busy machine)
            cwd=CHILD.parent,
        )
        assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {"status": "done", "output": "Written."}
    resumed = s.bodies[1]["messages"]
    assert resumed[1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants a.md. I should read it with read_file.",
        "signature": pr.SIGNATURE,
    }
    assert resumed[2]["content"][0]["tool_use_id"] == "toolu_01W"


async def test_a_claude_thinking_turn_sent_to_another_provider_carries_no_foreign_fields(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    _, tools = make_tools()
    with serve(raw_reply(gated_thinking_turn())) as s:
        suspended = await Agent(claude(s), tools, store=SQLiteStore(db)).run("Write a.md")
    with serve(raw_reply(pr.gemini_compat(text="Written."))) as s:
        openai = Agent(compatible(s, "openai/gpt-4o"), tools, store=SQLiteStore(db))
        result = await openai.resume(suspended.run_id, decisions={"toolu_01W": Approve()})
    assert result.output == "Written."
    assert s.bodies[0]["messages"] == [
        {"role": "user", "content": "Write a.md"},
        {
            "role": "assistant",
            "content": "I'll read the file.",
            "tool_calls": [
                {"id": "toolu_01W", "type": "function",
                 "function": {"name": "write_file",
                              "arguments": json.dumps({"path": "a.md", "content": "x"})}}
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_01W", "content": "wrote 1 bytes to a.md"},
    ]  # fmt: skip


async def test_a_rate_limit_tells_its_status_type_message_and_retry_after() -> None:
    limited = raw_reply(pr.openai_rate_limit(), status=429, headers=(("retry-after", "7"),))
    with serve(limited) as s, pytest.raises(ModelError) as caught:
        await compatible(s, "openai/gpt-4o").complete(
            ModelRequest(messages=(UserMessage(content="hi"),))
        )
    error = caught.value
    assert (error.status, error.error_type, error.retry_after) == (429, "rate_limit_exceeded", 7.0)
    assert error.provider_message is not None
    assert error.provider_message.startswith("Rate limit reached for gpt-4o")
    assert error.retryable


async def test_an_overloaded_claude_fails_the_run_with_529_kept_in_the_store(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    overloaded = pr.anthropic_error("overloaded_error", "Overloaded")
    with serve(raw_reply(overloaded, status=529)) as s:
        result = await Agent(claude(s), store=SQLiteStore(db)).run("hi")
    assert result.status == "failed"
    assert result.failure is not None
    assert (result.failure.status, result.failure.error_type) == (529, "overloaded_error")
    assert result.failure.provider_message == "Overloaded"
    stored = await SQLiteStore(db).load(result.run_id)
    assert stored.failure == result.failure


async def test_a_bad_request_is_not_retried() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    bad = pr.anthropic_error(
        "invalid_request_error", "messages: text content blocks must be non-empty"
    )
    with serve(raw_reply(bad, status=400), raw_reply(pr.anthropic_text("never"))) as s:
        model = RetryingModel(claude(s), RetryPolicy(attempts=3), sleep=sleep)
        with pytest.raises(ModelError) as caught:
            await model.complete(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert (caught.value.status, waits, len(s.requests)) == (400, [], 1)


async def test_a_rate_limited_call_is_retried_after_the_providers_wait() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    limited = raw_reply(pr.openai_rate_limit(), status=429, headers=(("retry-after", "7"),))
    overloaded = raw_reply(pr.anthropic_error("overloaded_error", "Overloaded"), status=529)
    with serve(limited, raw_reply(pr.gemini_compat(text="ok"))) as s:
        model = RetryingModel(compatible(s, "openai/gpt-4o"), RetryPolicy(attempts=3), sleep=sleep)
        response = await model.complete(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert (response.message.content, waits, len(s.requests)) == ("ok", [7.0], 2)
    assert s.bodies[0] == s.bodies[1]
    with serve(overloaded, overloaded, overloaded) as s:
        policy = RetryPolicy(attempts=3, backoff_s=0.5, max_delay_s=30)
        with pytest.raises(ModelError) as caught:
            await RetryingModel(claude(s), policy, sleep=sleep).complete(
                ModelRequest(messages=(UserMessage(content="hi"),))
            )
    assert (caught.value.status, waits[1:], len(s.requests)) == (529, [0.5, 1.0], 3)


async def test_a_dropped_connection_has_no_status_and_may_be_retried() -> None:
    with serve(dropped_connection()) as s, pytest.raises(ModelError) as caught:
        await compatible(s, "openai/gpt-4o").complete(
            ModelRequest(messages=(UserMessage(content="hi"),))
        )
    assert (caught.value.status, caught.value.error_type) == (None, "connection")
    assert caught.value.retryable
