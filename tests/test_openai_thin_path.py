"""The fast path of an `openai/` call (`provider_path.py`) against litellm's own:
the same bytes and headers on the wire, the same replies read, the same errors, over real
HTTP to a model server on 127.0.0.1 answering with recorded provider bodies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import provider_replies as pr
import pytest
from model_server import Reply, delayed, dropped_connection, raw_reply, serve, text_reply
from thin_support import Counting, same_outcome, wire

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import AssistantMessage, Message, ToolMessage, UserMessage
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string", "pattern": "(?<name>x)"}},
    },
)
# The recorded replies of OpenAI-compatible providers, each answered after a first call.
REPLIES = {
    "plain text": text_reply("Done, ünïcode ✓."),
    "deepseek reasoning + calls": raw_reply(
        pr.deepseek("Look first.", pr.deepseek_call(0, "a.py"), pr.deepseek_call(1, "b.py"))
    ),
    "groq reasoning": raw_reply(pr.groq("Thinking.", pr.gemini_call("c.py", call_id="x"))),
    "gemini empty and repeated ids": raw_reply(
        pr.gemini_compat(
            pr.gemini_call("a.py", signature="sig=="), pr.gemini_call("b.py"), text="Two."
        )
    ),
}


def _history(model: str) -> list[Message]:
    from loopstate.engine.messages import Origin, tool_call

    origin = Origin(provider="openai", model=model)
    call = tool_call("call_1", "read_file", json.dumps({"path": "src/ü.py"}))
    return [
        UserMessage(content="Summarise the repository, ünïcode ✓."),
        AssistantMessage(content=None, tool_calls=(call,), reasoning="r", origin=origin,
                         reasoning_field="reasoning_content"),
        ToolMessage(tool_call_id="call_1", content="print(1)\n"),
    ]  # fmt: skip


async def _calls(
    replies: list[Reply],
    *,
    direct: bool,
    tools: bool = True,
    after_first: Callable[[LiteLLMModel], None] | None = None,
    **settings: Any,
) -> tuple[list[Any], list[ModelResponse | ModelError], int]:
    """Two calls per reply (the first fills the thin path's template): what the server saw,
    what each call returned or raised, and how many calls reached litellm.acompletion."""
    out: list[ModelResponse | ModelError] = []
    name = "openai/test-model"
    script = [r for reply in replies for r in (text_reply("First."), reply)]
    with serve(*script) as server:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct,
                             **settings)  # fmt: skip
        request = ModelRequest(
            messages=tuple(_history(name)), tools=(READ_FILE,) if tools else (), step=3
        )
        with Counting() as count:
            for _ in script:
                try:
                    out.append(await model.complete(request))
                except ModelError as exc:
                    out.append(exc)
                if after_first is not None and len(out) == 1:
                    after_first(model)
    return server.requests, out, count.reached


def _timeless(message: str) -> str:
    """The message without the seconds a timeout took (they differ from call to call)."""
    return re.sub(r"time taken=[0-9.]+", "time taken=?", message)


async def _compare(replies: list[Reply], *, made: bool = False, **settings: Any) -> list[Any]:
    own_requests, own, own_reached = await _calls(replies, direct=False, **settings)
    thin_requests, thin, thin_reached = await _calls(replies, direct=True, **settings)
    assert own_reached == len(own)
    assert thin_reached == 1  # every later call took the thin path
    assert wire(thin_requests) == wire(own_requests)
    for a, b in zip(own, thin, strict=True):
        same_outcome(a, b, made=made and b is thin[-1])
    return thin


async def test_recorded_provider_replies_read_the_same_and_the_requests_are_byte_identical() -> (
    None
):
    thin = await _compare(list(REPLIES.values()))
    assert [r.message.content for r in thin if isinstance(r, ModelResponse)][1] is not None


async def test_settings_and_a_request_without_tools_send_the_same_bytes() -> None:
    await _compare(
        [text_reply("One."), text_reply("Two.")],
        temperature=0.2, max_tokens=50, seed=7, extra_headers={"x-trace": "t1"},
        timeout=30, extra_body={"top_k": 3},
    )  # fmt: skip
    _, replies, _ = await _calls([text_reply("One.")], direct=True, tools=False)
    assert isinstance(replies[-1], ModelResponse)


@pytest.mark.parametrize(
    "reply",
    [
        raw_reply(pr.openai_rate_limit(), status=429, headers=(("retry-after", "7"),)),
        Reply(status=500),
        Reply(status=503),
        Reply(status=400),
        Reply(status=401),
        dropped_connection(),
    ],
    ids=["429 retry-after", "500", "503", "400", "401", "dropped"],
)
async def test_errors_map_to_the_same_model_error(reply: Reply) -> None:
    thin = await _compare([reply])
    assert isinstance(thin[-1], ModelError)


async def test_an_output_limit_400_is_the_same_empty_reply() -> None:
    limit = raw_reply(pr.openai_output_limit(), status=400)
    thin = await _compare([limit], made=True, max_tokens=1)
    assert isinstance(thin[-1], ModelResponse)
    assert not thin[-1].message.content
    assert thin[-1].usage.prompt_tokens > 0  # litellm's estimate of the prompt it was billed


async def test_a_timeout_maps_to_the_same_model_error() -> None:
    thin = await _compare([delayed(text_reply("Late."), 4)], timeout=2)
    assert isinstance(thin[-1], ModelError)
    assert thin[-1].error_type == "timeout"


async def test_callbacks_retries_or_direct_false_keep_every_call_on_litellm() -> None:
    _, _, reached = await _calls([text_reply("One.")], direct=True, num_retries=1)
    assert reached == 2
    litellm = _import_litellm()
    litellm.success_callback.append(lambda *args: None)
    try:
        _, _, reached = await _calls([text_reply("One.")], direct=True)
    finally:
        litellm.success_callback.pop()
    assert reached == 2


# Whole runs: each history grows call by call, turns carry reasoning, provider fields, empty
# and repeated call ids; a second model joins mid-history (its turns go as plain text).
RUNS = {
    "deepseek": [
        raw_reply(pr.deepseek("Look.", pr.deepseek_call(0, "a.md"), pr.deepseek_call(1, "b.md"))),
        raw_reply(pr.deepseek("Again.", pr.deepseek_call(2, "c.md"))),
        raw_reply(pr.deepseek("Done.", content="All read.")),
    ],
    "groq": [
        raw_reply(pr.groq("Hmm.", pr._function("call_g1", "read_file", {"path": "a.md"}))),
        raw_reply(pr.groq("Fine.")),
    ],
    "gemini": [
        raw_reply(
            pr.gemini_compat(pr.gemini_call("a.md", signature="CsYBAX=="), pr.gemini_call("b.md"))
        ),
        raw_reply(
            pr.gemini_compat(*[pr._function("call_dup", "read_file", {"path": p}) for p in "cd"])
        ),
        raw_reply(pr.gemini_compat(text="Both.")),
    ],
}


async def _run(script: list[Reply], *, direct: bool) -> tuple[list[Any], list[Any], int]:
    from support import make_tools

    from loopstate import Agent

    _, tools = make_tools()
    with Counting() as count:
        tail = (raw_reply(pr.gemini_compat(pr.gemini_call("z.md"))), text_reply("Later."))
        with serve(*script, *tail) as server:
            model = LiteLLMModel("openai/test-model", api_base=server.openai_base,
                                 api_key="k", direct=direct)  # fmt: skip
            agent = Agent(model, tools)
            result = await agent.run("go, ünïcode ✓")
            other = LiteLLMModel("openai/other-model", api_base=server.openai_base,
                                 api_key="k", direct=direct)  # fmt: skip
            history = [*result.messages, UserMessage(content="and then?")]
            later = await Agent(other, tools).run(history)
    return server.requests, [result.messages, later.messages], count.reached


@pytest.mark.parametrize("provider", RUNS)
async def test_whole_runs_send_byte_identical_requests_and_keep_the_same_history(
    provider: str,
) -> None:
    own_requests, own, own_reached = await _run(RUNS[provider], direct=False)
    thin_requests, thin, thin_reached = await _run(RUNS[provider], direct=True)
    assert own_reached == len(own_requests) == len(RUNS[provider]) + 2
    assert thin_reached == 2  # each model's first call; every later call took the thin path
    assert wire(thin_requests) == wire(own_requests)
    assert thin == own


async def test_cookies_in_the_pool_go_out_as_the_sdk_client_would_send_them() -> None:
    # A load balancer's session cookie (Cloudflare's __cf_bm in front of real APIs), set in the
    # client's pool's jar after the first call: the SDK client sends it from then on.
    def cookie(model: LiteLLMModel) -> None:
        assert model._path is not None
        model._path.client.cookies.set("__cf_bm", "abc123")

    replies = [text_reply("One."), text_reply("Two.")]
    thin_requests, _, reached = await _calls(replies, direct=True, after_first=cookie)
    assert reached == 1
    assert [r.headers.get("cookie") for r in thin_requests] == [None] + ["__cf_bm=abc123"] * 3


async def test_models_of_the_same_settings_share_one_client_over_litellms_pool() -> None:
    settings = {"api_base": "http://127.0.0.1:9/v1", "api_key": "k"}
    name = "openai/test-model"
    first, second = LiteLLMModel(name, **settings), LiteLLMModel(name, **settings)
    other = LiteLLMModel(name, api_base="http://127.0.0.1:9/v2", api_key="k")
    assert first._fast_path() is second._fast_path()
    assert other._fast_path() is not first._fast_path()
