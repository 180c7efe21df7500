"""The OpenAI-compatible direct payload path: the same request on the wire as litellm's own
client sends, over real HTTP to a model server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from model_server import serve, text_reply

from loopstate.engine.messages import AssistantMessage, Message, ToolMessage, UserMessage, tool_call
from loopstate.engine.model import ModelRequest, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm
from loopstate.engine.models.openai_client import DirectPayloadClient

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def history(turns: int) -> tuple[Message, ...]:
    messages: list[Message] = [UserMessage(content="Summarise the repository, ünïcode ✓.")]
    for i in range(turns):
        call = tool_call(f"call_{i}", "read_file", json.dumps({"path": f"src/{i}.py"}))
        messages.append(AssistantMessage(content=f"Reading {i}", tool_calls=(call,)))
        messages.append(ToolMessage(tool_call_id=f"call_{i}", content=f"print({i})\n"))
    return tuple(messages)


async def body_sent(**settings: Any) -> str:
    request = ModelRequest(messages=history(12), tools=(READ_FILE,), step=13)
    with serve(text_reply("Done.")) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.openai_base, api_key="k", **settings
        )
        await model.complete(request)
    return json.dumps(server.bodies[0])


async def test_the_direct_path_sends_the_body_litellms_own_client_sends() -> None:
    # `shared_session` is one of the settings that leave the client to litellm.
    own = await body_sent(shared_session=None)
    direct = await body_sent()
    assert direct == own  # same keys, same order, same values
    assert '"messages": [{"role": "user"' in direct


async def test_an_openai_model_with_explicit_base_and_key_uses_the_direct_client() -> None:
    with serve() as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        arguments = model._arguments(ModelRequest(messages=history(1), step=2))
    assert isinstance(arguments["client"], DirectPayloadClient)


async def test_other_providers_and_implicit_credentials_keep_litellms_client() -> None:
    request = ModelRequest(messages=history(1), step=2)
    for model in (
        LiteLLMModel("anthropic/claude-x", api_base="http://127.0.0.1:9"),
        LiteLLMModel("openai/test-model", api_base="http://127.0.0.1:9"),
        LiteLLMModel("gemini/gemini-2.5-flash", api_base="http://127.0.0.1:9", api_key="k"),
    ):
        assert "client" not in model._arguments(request)
    # Anthropic with explicit credentials: litellm's own handler, over its own HTTP client
    from litellm.llms.custom_httpx.http_handler import get_async_httpx_client

    anthropic = LiteLLMModel("anthropic/claude-x", api_base="http://127.0.0.1:9", api_key="k")
    handler = anthropic._arguments(request)["client"]
    own = get_async_httpx_client(llm_provider=_import_litellm().LlmProviders.ANTHROPIC)
    assert handler.client is own.client


async def test_a_pool_litellm_closed_is_replaced_before_the_next_call() -> None:
    with serve(text_reply("One."), text_reply("Two.")) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
        request = ModelRequest(messages=history(1), step=2)
        await model.complete(request)
        litellm = _import_litellm()
        own = litellm.main.openai_chat_completions.get_openai_client(
            is_async=True, api_key="k", api_base=server.openai_base, max_retries=0
        )
        # What litellm's client cache does when it lets a client go: close it, forget it.
        await own.close()
        cache = litellm.in_memory_llm_clients_cache
        for key in [k for k, v in cache.cache_dict.items() if v is own]:
            cache.delete_cache(key)
        second = await model.complete(request)
    assert second.message.content == "Two."


def test_importing_loopstate_does_not_import_the_openai_sdk() -> None:
    # The direct client subclasses the SDK's: it is loaded with litellm, on the first call.
    code = "import sys, loopstate; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
