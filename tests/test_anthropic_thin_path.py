"""The thin path of an Anthropic call (`anthropic_direct.py`) against litellm's own: the same
bytes and headers on the wire, the same replies and costs, the same errors, over real HTTP to
a model server on 127.0.0.1 answering with recorded Anthropic bodies (extended thinking with
signatures, redacted thinking, tool use, cache usage)."""

from __future__ import annotations

import json
import re
from typing import Any

import provider_replies as pr
import pytest
from model_server import Reply, delayed, dropped_connection, raw_reply, serve
from thin_support import Counting, same_outcome, wire

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    Origin,
    SystemMessage,
    ToolMessage,
    UserMessage,
    tool_call,
)
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm

NAME = "anthropic/claude-sonnet-4-5"
READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
RATE_LIMITED = pr.anthropic_error(
    "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
)
REPLIES = {
    "thinking + tool use": raw_reply(pr.anthropic_thinking_tool_use()),
    "redacted thinking": raw_reply(pr.anthropic_thinking_tool_use(redacted=True)),
    "text, ünïcode": raw_reply(pr.anthropic_text("Done, ünïcode ✓.")),
}


def _history() -> list[Message]:
    origin = Origin(provider="anthropic", model=NAME)
    call = tool_call("toolu_01A", "read_file", json.dumps({"path": "src/ü.py"}))
    return [
        SystemMessage(content="You read files."),
        UserMessage(content="Summarise the repository, ünïcode ✓."),
        AssistantMessage(content="Reading.", tool_calls=(call,), origin=origin),
        ToolMessage(tool_call_id="toolu_01A", content="print(1)\n"),
    ]


async def _calls(
    replies: list[Reply], *, direct: bool, **settings: Any
) -> tuple[list[Any], list[ModelResponse | ModelError], int]:
    """One call per reply, after a first one that fills the thin path's template: what the
    server saw, what each call returned or raised, how many calls reached litellm."""
    out: list[ModelResponse | ModelError] = []
    script = [raw_reply(pr.anthropic_text("First.")), *replies]
    with serve(*script) as server, Counting() as count:
        model = LiteLLMModel(NAME, api_base=server.url, api_key="sk-ant", direct=direct,
                             **settings)  # fmt: skip
        request = ModelRequest(messages=tuple(_history()), tools=(READ_FILE,), step=3)
        for _ in script:
            try:
                out.append(await model.complete(request))
            except ModelError as exc:
                out.append(exc)
    return server.requests, out, count.reached


def _timeless(message: str) -> str:
    return re.sub(r"[0-9.]+ ?s(econds)?\b", "?s", message)


async def _compare(replies: list[Reply], **settings: Any) -> list[Any]:
    own_requests, own, own_reached = await _calls(replies, direct=False, **settings)
    thin_requests, thin, thin_reached = await _calls(replies, direct=True, **settings)
    assert own_reached == len(own)
    assert thin_reached == 1  # every later call took the thin path
    assert wire(thin_requests) == wire(own_requests)
    for a, b in zip(own, thin, strict=True):
        same_outcome(a, b)
        if isinstance(a, ModelError) and isinstance(b, ModelError):
            assert a.retry_after == b.retry_after
    return thin


async def test_recorded_replies_read_the_same_cost_the_same_and_the_requests_are_identical() -> (
    None
):
    thin = await _compare(list(REPLIES.values()))
    first = thin[1]
    assert isinstance(first, ModelResponse)
    assert first.message.thinking_blocks
    assert first.usage.cached_tokens == 2048
    assert first.usage.cost_usd


async def test_settings_send_the_same_bytes() -> None:
    await _compare(
        [raw_reply(pr.anthropic_text("Two."))],
        temperature=0.2, max_tokens=512, extra_headers={"x-trace": "t1"}, timeout=30,
    )  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        raw_reply(RATE_LIMITED, status=429, headers=(("retry-after", "7"),)),
        raw_reply(pr.anthropic_error("overloaded_error", "Overloaded"), status=529),
        raw_reply(pr.anthropic_error("invalid_request_error", "messages: bad"), status=400),
        raw_reply(pr.anthropic_error("authentication_error", "invalid x-api-key"), status=401),
        dropped_connection(),
    ],
    ids=["429 retry-after", "529 overloaded", "400", "401", "dropped"],
)
async def test_errors_map_to_the_same_model_error(reply: Reply) -> None:
    thin = await _compare([reply])
    assert isinstance(thin[-1], ModelError)


async def test_a_timeout_maps_to_the_same_model_error() -> None:
    thin = await _compare([delayed(raw_reply(pr.anthropic_text("Late.")), 4)], timeout=2)
    assert isinstance(thin[-1], ModelError)
    assert thin[-1].error_type == "timeout"


async def test_callbacks_retries_custom_prices_or_direct_false_keep_every_call_on_litellm() -> None:
    again = [raw_reply(pr.anthropic_text("Two."))]
    assert (await _calls(again, direct=True, num_retries=1))[2] == 2
    assert (await _calls(again, direct=True, input_cost_per_token=1e-6))[2] == 2
    assert (await _calls(again, direct=False))[2] == 2
    litellm = _import_litellm()
    litellm.success_callback.append(lambda *args: None)
    try:
        assert (await _calls(again, direct=True))[2] == 2
    finally:
        litellm.success_callback.pop()


async def _run(script: list[Reply], *, direct: bool) -> tuple[list[Any], list[Any], int]:
    from support import make_tools

    from loopstate import Agent

    _, tools = make_tools()
    with serve(*script) as server, Counting() as count:
        model = LiteLLMModel(NAME, api_base=server.url, api_key="sk-ant", direct=direct)
        result = await Agent(model, tools, instructions="You read files.").run("go, ünïcode ✓")
    return server.requests, list(result.messages), count.reached


async def test_a_whole_run_carries_thinking_back_byte_for_byte_and_keeps_the_same_history() -> None:
    script = [
        raw_reply(pr.anthropic_thinking_tool_use()),
        raw_reply(pr.anthropic_thinking_tool_use(redacted=True)),
        raw_reply(pr.anthropic_thinking_tool_use()),
        raw_reply(pr.anthropic_text("All read.")),
    ]
    own_requests, own, own_reached = await _run(script, direct=False)
    thin_requests, thin, thin_reached = await _run(script, direct=True)
    assert own_reached == len(own_requests) == 4
    assert thin_reached == 1  # the first call; every later one took the thin path
    assert wire(thin_requests) == wire(own_requests)
    assert thin == own
    last = thin_requests[-1].body["messages"]
    assert any(b.get("type") == "redacted_thinking" for m in last for b in m["content"])
