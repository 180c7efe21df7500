"""LiteLLMModel against a real model server on 127.0.0.1, over real HTTP, through litellm."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from model_server import (
    ModelServer,
    Reply,
    delayed,
    dropped_connection,
    error_reply,
    serve,
    text_reply,
    tool_call_reply,
)

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    Origin,
    SystemMessage,
    ToolMessage,
    UserMessage,
    to_wire,
    tool_call,
)
from loopstate.engine.model import ModelRequest, ModelResponse, ToolChoice, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)

HISTORY: tuple[Message, ...] = (
    SystemMessage(content="Be brief."),
    UserMessage(content="Read a.md"),
    AssistantMessage(tool_calls=(tool_call("call_1", "read_file", '{"path": "a.md"}'),)),
    ToolMessage(tool_call_id="call_1", content="# A"),
)


TEST_ORIGIN = Origin(provider="openai", model="openai/test-model")


def openai_model(
    server: ModelServer, name: str = "openai/test-model", **settings: Any
) -> LiteLLMModel:
    return LiteLLMModel(name, api_base=server.openai_base, api_key="sk-test", **settings)


def ask(
    *messages: Message,
    tools: tuple[ToolDefinition, ...] = (),
    tool_choice: ToolChoice = "auto",
) -> ModelRequest:
    return ModelRequest(
        messages=messages or (UserMessage(content="hi"),), tools=tools, tool_choice=tool_choice
    )


async def complete_once(reply: Reply, **settings: Any) -> tuple[ModelResponse, ModelServer]:
    with serve(reply) as server:
        response = await openai_model(server, **settings).complete(ask(tools=(READ_FILE,)))
    return response, server


async def test_a_tool_call_reply_keeps_the_providers_ids_names_and_raw_arguments() -> None:
    response, _ = await complete_once(
        tool_call_reply(
            ("call_Zx9", "read_file", '{"path":   "a.md" }'),
            ("call_Q2", "read_file", '{"path": '),
        )
    )
    assert response.message == AssistantMessage(
        content=None,
        tool_calls=(
            tool_call("call_Zx9", "read_file", '{"path":   "a.md" }'),
            tool_call("call_Q2", "read_file", '{"path": '),
        ),
        origin=TEST_ORIGIN,
    )
    assert response.finish_reason == "tool_calls"


async def test_a_text_reply_becomes_an_assistant_message_without_tool_calls() -> None:
    response, _ = await complete_once(text_reply("Hello."))
    assert response.message == AssistantMessage(
        content="Hello.", tool_calls=None, origin=TEST_ORIGIN
    )
    assert (response.finish_reason, response.model) == ("stop", "test-model")


async def test_history_tools_and_tool_choice_go_on_the_wire_in_openai_format() -> None:
    with serve(text_reply("ok")) as server:
        request = ask(*HISTORY, tools=(READ_FILE,), tool_choice="required")
        await openai_model(server).complete(request)
    (body,) = server.bodies
    assert body["model"] == "test-model"
    assert body["messages"] == [to_wire(m) for m in HISTORY]
    assert body["tools"] == [READ_FILE.to_wire()]
    assert body["tool_choice"] == "required"


async def test_a_request_without_tools_sends_neither_tools_nor_tool_choice() -> None:
    with serve(text_reply("ok")) as server:
        await openai_model(server).complete(ask(tool_choice="required"))
    assert "tools" not in server.bodies[0]
    assert "tool_choice" not in server.bodies[0]


async def test_settings_pass_through_to_the_request_body_and_headers() -> None:
    with serve(text_reply("ok")) as server:
        model = openai_model(
            server, temperature=0.25, max_tokens=64, extra_headers={"X-Trace": "t-1"}
        )
        await model.complete(ask())
    (request,) = server.requests
    assert (request.body["temperature"], request.body["max_tokens"]) == (0.25, 64)
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-trace"] == "t-1"
    assert "num_retries" not in request.body


async def test_usage_is_taken_from_the_reply_and_an_unpriced_models_cost_is_unknown() -> None:
    response, _ = await complete_once(text_reply("ok", usage=(13, 5)))
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (13, 5)
    assert (response.usage.cost_usd, response.usage.unpriced) == (None, 1)
    assert not response.usage.cost_known


async def test_a_priced_model_costs_what_litellms_local_price_map_says() -> None:
    import litellm  # already imported by the adapter; here only to read its prices

    with serve(text_reply("ok", usage=(1000, 100))) as server:
        response = await openai_model(server, "openai/gpt-4o-mini").complete(ask())
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 1000 * prices["input_cost_per_token"] + 100 * prices["output_cost_per_token"]
    assert response.usage.cost_usd == pytest.approx(expected)
    assert response.usage.cost_usd > 0


async def test_prices_passed_as_settings_price_a_model_litellm_does_not_know() -> None:
    with serve(text_reply("ok", usage=(10, 5))) as server:
        model = openai_model(
            server,
            "openai/loopstate-custom-priced",
            input_cost_per_token=0.001,
            output_cost_per_token=0.002,
        )
        response = await model.complete(ask())
    assert response.usage.cost_usd == pytest.approx(0.02)


async def test_one_complete_makes_exactly_one_request_and_runs_no_tool() -> None:
    with serve(
        tool_call_reply(("call_1", "read_file", {"path": "a.md"})), text_reply("Done.")
    ) as server:
        response = await openai_model(server).complete(ask(tools=(READ_FILE,)))
    assert len(server.requests) == 1
    assert [c.id for c in response.message.calls] == ["call_1"]


@pytest.mark.parametrize(
    "failure",
    [error_reply(500), error_reply(503), error_reply(401), error_reply(400), dropped_connection()],
    ids=["server error", "unavailable", "bad key", "bad request", "dropped connection"],
)
async def test_a_failed_request_is_one_model_error_naming_the_model(failure: Reply) -> None:
    with (
        serve(failure, text_reply("a retry would get this")) as server,
        pytest.raises(ModelError, match=r"^model openai/test-model failed: ") as caught,
    ):
        await openai_model(server).complete(ask())
    assert len(server.requests) == 1
    assert type(caught.value.__cause__).__module__ == "litellm.exceptions"


async def test_an_unreachable_server_is_a_model_error_naming_the_model() -> None:
    with serve() as server:
        pass  # closed: its port now refuses connections
    with pytest.raises(ModelError, match="model openai/test-model failed") as caught:
        await openai_model(server).complete(ask())
    assert "Connection" in str(caught.value)


async def test_a_reply_slower_than_the_timeout_setting_is_a_model_error() -> None:
    with (
        serve(delayed(text_reply("late"), 3)) as server,
        pytest.raises(ModelError, match="model openai/test-model failed: Timeout"),
    ):
        await openai_model(server, timeout=0.2).complete(ask())
    assert len(server.requests) == 1


async def test_a_cancelled_call_raises_cancelled_error_not_a_model_error() -> None:
    with serve(delayed(text_reply("late"), 3)) as server:
        call = asyncio.create_task(openai_model(server).complete(ask()))
        await asyncio.to_thread(server.wait_for_requests, 1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call


async def test_a_retry_setting_given_by_the_caller_is_honoured() -> None:
    with serve(error_reply(500), text_reply("second time lucky")) as server:
        response = await openai_model(server, max_retries=1).complete(ask())
    assert response.message.content == "second time lucky"
    assert len(server.requests) == 2


@pytest.mark.parametrize("setting", ["model", "messages", "tools", "tool_choice", "stream"])
def test_a_setting_that_the_request_decides_is_refused(setting: str) -> None:
    with pytest.raises(TypeError, match=setting):
        LiteLLMModel("openai/test-model", **{setting: True})


def test_the_repr_shows_settings_but_not_credentials() -> None:
    model = LiteLLMModel("openai/x", api_key="sk-SECRET", extra_headers={"k": "s"}, top_p=0.5)
    assert repr(model) == "LiteLLMModel('openai/x', {'top_p': 0.5})"


async def test_the_anthropic_format_round_trips_tool_use_and_tool_results() -> None:
    with serve(
        tool_call_reply(("toolu_01", "read_file", {"path": "a.md"})),
        text_reply("It says A."),
    ) as server:
        model = LiteLLMModel("anthropic/claude-sonnet-4-5", api_base=server.url, api_key="sk-ant")
        first = await model.complete(ask(UserMessage(content="Read a.md"), tools=(READ_FILE,)))
        result = ToolMessage(tool_call_id="toolu_01", content="# A")
        history = (UserMessage(content="Read a.md"), first.message, result)
        second = await model.complete(ask(*history, tools=(READ_FILE,)))
    assert first.message.calls == (tool_call("toolu_01", "read_file", '{"path": "a.md"}'),)
    assert (first.finish_reason, second.message.content) == ("tool_calls", "It says A.")
    assert first.usage.cost_usd > 0  # claude-sonnet-4-5 is in litellm's local price map
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages"]
    assert server.requests[0].headers["x-api-key"] == "sk-ant"
    tools = server.bodies[0]["tools"]
    assert [(t["name"], t["input_schema"]) for t in tools] == [("read_file", READ_FILE.parameters)]
    turns = server.bodies[1]["messages"]
    assert turns[1]["content"] == [
        {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.md"}}
    ]
    (block,) = turns[2]["content"]
    assert (block["type"], block["tool_use_id"]) == ("tool_result", "toolu_01")
    assert "# A" in json.dumps(block["content"])
