"""Whole runs through LiteLLMModel and real HTTP to a model server on 127.0.0.1."""

from __future__ import annotations

import json

from model_server import serve, text_reply, tool_call_reply
from support import make_tools

from loopstate import Agent, Approve, LiteLLMModel


async def approve_all(requests):
    return {r.call_id: Approve() for r in requests}


async def test_a_tool_call_is_approved_run_and_the_second_request_carries_its_result() -> None:
    counted, tools = make_tools()
    with serve(
        tool_call_reply(("call_abc", "write_file", {"path": "a.txt", "content": "hi"})),
        text_reply("All written."),
    ) as server:
        model = LiteLLMModel("openai/test-model", api_base=f"{server.url}/v1", api_key="sk-test")
        result = await Agent(model, tools, instructions="Be brief.", approver=approve_all).run(
            "write it"
        )
    assert (result.status, result.output) == ("done", "All written.")
    assert counted["write_file"] == 1
    assert len(server.requests) == 2
    first, second = (r.body for r in server.requests)
    assert first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == [t.name for t in tools]
    assert second["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "write it"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "a.txt", "content": "hi"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "wrote 2 bytes to a.txt"},
    ]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert result.usage.prompt_tokens == 22
    assert result.usage.completion_tokens == 14


async def test_settings_pass_through_to_the_wire_and_one_request_is_made_per_step() -> None:
    with serve(text_reply("hi")) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=f"{server.url}/v1", api_key="k", temperature=0.25
        )
        result = await Agent(model).run("hello")
    assert result.output == "hi"
    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["temperature"] == 0.25
    assert "tools" not in body
    assert "tool_choice" not in body


async def test_a_server_error_fails_the_run_once_without_hidden_retries() -> None:
    from model_server import error_reply

    with serve(error_reply(500)) as server:
        model = LiteLLMModel("openai/test-model", api_base=f"{server.url}/v1", api_key="k")
        result = await Agent(model).run("hello")
    assert result.status == "failed"
    assert result.error is not None
    assert "model openai/test-model failed" in result.error
    assert len(server.requests) == 1


async def test_an_unreachable_server_fails_the_run_with_a_model_error() -> None:
    with serve() as server:
        url = server.url
    model = LiteLLMModel("openai/test-model", api_base=f"{url}/v1", api_key="k", timeout=5)
    result = await Agent(model).run("hello")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("ModelError: model openai/test-model failed")


async def test_the_anthropic_format_works_end_to_end_through_litellm() -> None:
    counted, tools = make_tools()
    with serve(
        tool_call_reply(("toolu_1", "read_file", {"path": "x.md"})),
        text_reply("Read it."),
    ) as server:
        model = LiteLLMModel("anthropic/claude-test", api_base=server.url, api_key="sk-ant")
        result = await Agent(model, tools).run("read x.md")
    assert (result.status, result.output) == ("done", "Read it.")
    assert counted["read_file"] == 1
    assert all(r.path.endswith("/v1/messages") for r in server.requests)
    assert server.requests[0].headers["x-api-key"] == "sk-ant"
    second = server.requests[1].body["messages"]
    assert second[-2]["content"][-1] == {
        "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "x.md"}
    }  # fmt: skip
    result_block = second[-1]["content"][0]
    assert (result_block["type"], result_block["tool_use_id"]) == ("tool_result", "toolu_1")
    assert "contents of x.md" in json.dumps(result_block["content"])
