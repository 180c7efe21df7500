"""The fast path on litellm's provider-config contract (`provider_path.py`) against
`litellm.acompletion`, over real HTTP to a model server on 127.0.0.1 answering with replies
shaped after recorded provider replies (`provider_replies.py`): the same bytes and headers on
the wire, the same replies (text, calls, reasoning, usage, cost), the same errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import provider_replies as pr
import pytest
import structlog
from model_server import Reply, delayed, raw_reply, serve
from thin_support import Counting, wire

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    Origin,
    ToolMessage,
    UserMessage,
    tool_call,
)
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models import provider_http
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.models.provider_path import ProviderPath

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
Replies = Callable[[int], dict[str, Any]]
# Each provider's model (priced in litellm's map where it has one) and its n-th reply.
PROVIDERS: dict[str, tuple[str, Replies]] = {
    "groq": (
        "groq/openai/gpt-oss-20b",
        lambda n: pr.groq("Thinking.", pr.gemini_call(f"c{n}.py", call_id=f"call_{n}")),
    ),
    "deepseek": (
        "deepseek/deepseek-reasoner",
        lambda n: pr.deepseek("Look first.", pr.deepseek_call(n, f"a{n}.py")),
    ),
    "xai": (
        "xai/grok-3-mini",
        lambda n: pr.openai("grok-3-mini", pr.gemini_call(f"x{n}.py", call_id=f"call_{n}")),
    ),
    "mistral": (
        "mistral/mistral-small-latest",
        lambda n: pr.openai("mistral-small-latest", pr.gemini_call(f"m{n}", call_id=f"c{n}")),
    ),
    "openrouter": (
        "openrouter/openai/gpt-4o-mini",
        lambda n: pr.openai("openai/gpt-4o-mini", pr.gemini_call(f"o{n}", call_id=f"c{n}")),
    ),
}
STEPS = 4


def _grown(body: dict[str, Any], n: int) -> dict[str, Any]:
    """`body` with its usage grown by step `n`, cached and reasoning counts too where given
    (each reply priced anew at the rates learned on the first)."""
    usage = body["usage"]
    grow = {"prompt_tokens": 977, "completion_tokens": 51, "cached_tokens": 512,
            "prompt_cache_hit_tokens": 512, "prompt_cache_miss_tokens": 465,
            "reasoning_tokens": 33}  # fmt: skip
    details = (usage.get("prompt_tokens_details"), usage.get("completion_tokens_details"))
    for counts in (usage, *details):
        for name, by in grow.items():
            if counts and isinstance(counts.get(name), int):
                counts[name] += by * n
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return body


LAST: dict[bool, LiteLLMModel] = {}


async def _run(
    name: str, replies: list[Reply], *, direct: bool
) -> tuple[list[Any], list[ModelResponse | ModelError], int]:
    """A run's model calls: the history grows by each reply and its tool results."""
    out: list[ModelResponse | ModelError] = []
    with serve(*replies) as server, Counting() as counting:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct)
        LAST[direct] = model  # its fast path lives while it does
        history: list[Message] = [UserMessage(content="Summarise, ünïcode ✓.")]
        for _ in replies:
            try:
                reply = await model.complete(
                    ModelRequest(messages=tuple(history), tools=(READ_FILE,))
                )
            except ModelError as error:
                out.append(error)
                continue
            out.append(reply)
            history.append(reply.message)
            history += [ToolMessage(tool_call_id=c.id, content="x") for c in reply.message.calls]
    return wire(server.requests), out, counting.reached


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_run_sends_litellms_bytes_and_reads_litellms_replies(provider: str) -> None:
    name, reply = PROVIDERS[provider]
    replies = [raw_reply(_grown(reply(n), n)) for n in range(STEPS)]
    own_wire, own, own_reached = await _run(name, replies, direct=False)
    fast_wire, fast, fast_reached = await _run(name, replies, direct=True)
    assert (own_reached, fast_reached) == (STEPS, 1)  # the first call records the shape
    assert fast_wire == own_wire
    assert fast == own
    assert all(isinstance(r, ModelResponse) and r.message.calls for r in fast)
    path = LAST[True]._path  # its later replies were read directly, as litellm reads them
    assert path is not None
    assert path.learned
    assert all(path.learned.values())


async def test_reasoning_cached_tokens_and_cost_come_through_the_fast_path() -> None:
    name, reply = PROVIDERS["deepseek"]
    _, fast, _ = await _run(name, [raw_reply(reply(n)) for n in range(2)], direct=True)
    later = fast[1]
    assert isinstance(later, ModelResponse)
    assert later.message.reasoning == "Look first."
    assert (later.usage.cached_tokens, later.usage.reasoning_tokens) == (64, 50)
    assert later.usage.cost_usd
    assert later.usage.cost_known


def _gemini(n: int) -> dict[str, Any]:
    signed = pr.gemini_call(f"a{n}.md", signature="CsYBAX==" if n % 2 else None)
    return pr.gemini_compat(signed, pr.gemini_call(f"b{n}.md"), text=f"Reading {n}." * (n % 2))


async def test_gemini_compatible_replies_are_read_directly_as_litellm_reads_them() -> None:
    """Calls without ids, with a thought signature (`extra_content`) or none, beside text."""
    replies = [raw_reply(_gemini(n)) for n in range(STEPS)]
    own_wire, own, _ = await _run("openai/gemini-2.5-flash", replies, direct=False)
    fast_wire, fast, reached = await _run("openai/gemini-2.5-flash", replies, direct=True)
    assert (reached, fast_wire, fast) == (1, own_wire, own)
    path = LAST[True]._path  # the fast path of the last run's model
    assert path is not None
    assert path.learned
    assert all(path.learned.values())  # every form read directly
    later = fast[-1]
    assert isinstance(later, ModelResponse)
    assert later.message.calls[0].provider_fields == {
        "extra_content": {"google": {"thought_signature": "CsYBAX=="}}
    }


async def test_a_model_priced_by_the_hour_is_priced_by_litellm_on_every_reply() -> None:
    """DeepSeek's off-peak prices: rates learned at one hour would misprice another."""
    name = "deepseek/deepseek-v4-flash"
    replies = [
        raw_reply(pr.openai("deepseek-v4-flash", pr.gemini_call(f"a{n}", call_id=f"call_{n}")))
        for n in range(3)
    ]
    _, fast, _ = await _run(name, replies, direct=True)
    path = LAST[True]._path
    assert path is not None
    assert [key[:2] for key in path.learned] == [("deepseek-v4-flash", "default")]
    assert list(path.learned.values()) == [None]
    assert all(isinstance(r, ModelResponse) and r.usage.cost_usd for r in fast)


ERRORS = {
    "rate limited": Reply(status=429, body=pr.openai_rate_limit(), headers=(("retry-after", "7"),)),
    "refused key": Reply(status=401, body={"error": {"message": "Invalid API Key",
                                                      "type": "invalid_request_error",
                                                      "code": "invalid_api_key"}}),
    "unavailable": Reply(status=503, body={"error": {"message": "over capacity",
                                                      "type": "internal_server_error"}}),
}  # fmt: skip


@pytest.mark.parametrize("failure", ERRORS.values(), ids=ERRORS)
@pytest.mark.parametrize("provider", ["groq", "deepseek"])
async def test_an_error_is_the_same_model_error_on_both_paths(
    provider: str, failure: Reply
) -> None:
    name, reply = PROVIDERS[provider]
    replies = [raw_reply(reply(0)), failure]
    _, own, _ = await _run(name, replies, direct=False)
    _, fast, reached = await _run(name, replies, direct=True)
    assert reached == 1
    a, b = own[1], fast[1]
    assert isinstance(a, ModelError)
    assert isinstance(b, ModelError)
    assert (a.status, a.error_type, a.retry_after, a.retryable) == (
        b.status, b.error_type, b.retry_after, b.retryable
    )  # fmt: skip
    assert b.provider_message == failure.body["error"]["message"]  # type: ignore[index]


async def test_a_reply_slower_than_the_timeout_is_a_timeout_on_the_fast_path() -> None:
    name, reply = PROVIDERS["groq"]
    with serve(raw_reply(reply(0)), delayed(raw_reply(reply(1)), 4)) as server:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", timeout=2)
        request = ModelRequest(messages=(UserMessage(content="Hi"),))
        await model.complete(request)
        with pytest.raises(ModelError) as caught:
            await model.complete(request)
    assert (caught.value.error_type, caught.value.retryable) == ("timeout", True)


async def test_a_changed_contract_sends_the_provider_through_litellm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, reply = PROVIDERS["groq"]
    with serve(*[raw_reply(reply(n)) for n in range(3)]) as server, Counting() as counting:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k")
        request = ModelRequest(messages=(UserMessage(content="Hi"),))
        await model.complete(request)

        def moved(self: ProviderPath) -> Any:
            raise AttributeError("module 'litellm' has no attribute 'ProviderConfigManager'")

        monkeypatch.setattr(ProviderPath, "contract", moved)
        with structlog.testing.capture_logs() as logs:
            second = await model.complete(request)
            third = await model.complete(request)
    assert second.message.calls
    assert third.message.calls
    assert counting.reached == 3
    assert [line["event"] for line in logs] == ["fast_path_disabled"]


def test_a_closed_event_loops_transport_is_not_kept() -> None:
    name, reply = PROVIDERS["groq"]
    request = ModelRequest(messages=(UserMessage(content="Hi"),))

    async def twice(model: LiteLLMModel) -> None:  # the second call takes the fast path
        await model.complete(request)
        await model.complete(request)

    with serve(*[raw_reply(reply(n)) for n in range(8)]) as server:
        for _ in range(4):  # as `run_sync` does: a new event loop each time
            asyncio.run(twice(LiteLLMModel(name, api_base=server.openai_base, api_key="k")))
    assert len([loop for loop in provider_http._TRANSPORTS if loop.is_closed()]) == 1


async def test_a_reply_form_litellm_reads_its_own_way_is_left_to_litellm() -> None:
    """Mistral's empty text is None in litellm's reading: a form first met after the model's
    rates were learned is checked once (and then left to litellm), never read wrongly."""
    replies = [
        raw_reply(
            pr.openai(
                "mistral-small-latest",
                pr.gemini_call(f"m{n}", call_id=f"c{n}"),
                text="" if n >= 2 else "Reading.",
            )
        )
        for n in range(STEPS)
    ]
    _, own, _ = await _run("mistral/mistral-small-latest", replies, direct=False)
    _, fast, reached = await _run("mistral/mistral-small-latest", replies, direct=True)
    assert (reached, fast) == (1, own)
    assert [r.message.content for r in fast if isinstance(r, ModelResponse)] == [
        "Reading.", "Reading.", None, None,
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["groq/openai/gpt-oss-20b", "openai/gpt-4o-mini"])
async def test_a_redirect_is_followed_and_a_cookie_set_is_kept_as_the_client_does(
    name: str,
) -> None:
    """The fast path sends on its client's transport, not through the client: a redirect is
    sent again through the client, which follows it; a cookie the server sets is kept (the
    SDK's client) or dropped (litellm's handler) as that client does."""
    moved = raw_reply({}, status=307, headers=(("location", "/moved/v1/chat/completions"),))
    cookie = (("set-cookie", "__cf_bm=abc123; Path=/"),)
    _, reply = PROVIDERS["groq"]
    # calls 1 and 2 set the shape; calls 3 and 4 take the fast path, 3 redirected (twice)
    replies = [raw_reply(reply(0)), raw_reply(reply(1), headers=cookie), moved, moved]
    replies += [raw_reply(reply(n)) for n in (2, 3)]
    request = ModelRequest(messages=(UserMessage(content="Hi"),), tools=(READ_FILE,))
    sent: dict[bool, list[Any]] = {}
    for direct in (False, True):
        with serve(*replies) as server, Counting() as counting:
            model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct)
            got = [await model.complete(request) for _ in range(4)]
        assert [len(r.message.calls) for r in got] == [1] * 4
        assert counting.reached == (1 if direct else 4)
        sent[direct] = wire(server.requests)
    paths = [path for path, _, _ in sent[True]]
    assert paths == ["/v1/chat/completions"] * 4 + ["/moved/v1/chat/completions"] * 1 + [
        "/v1/chat/completions"
    ]
    assert {body for _, _, body in sent[True]} == {body for _, _, body in sent[False]}
    kept = name.startswith("openai/")  # the SDK's client keeps cookies; litellm's drops them
    cookies = [headers.get("cookie") for _, headers, _ in sent[True]]
    assert cookies == [None, None] + ["__cf_bm=abc123" if kept else None] * 4


async def test_deepseek_thinking_fills_in_a_turns_missing_reasoning_as_litellm_does() -> None:
    """With thinking on, DeepSeek's transform gives an assistant turn without reasoning a
    placeholder (its API refuses such a turn otherwise): the fast path's transform of each
    call's new messages gets the call's parameters, so it does the same."""
    name = "deepseek/deepseek-reasoner"
    other = Origin(provider="openai", model="openai/gpt-4o-mini")  # a turn of another model
    call = tool_call("call_0", "read_file", '{"path": "a.md"}')
    replies = [raw_reply(pr.deepseek("Look.", pr.deepseek_call(n, f"{n}.md"))) for n in range(3)]
    sent: dict[bool, list[Any]] = {}
    for direct in (False, True):
        with serve(*replies) as server, Counting() as counting:
            model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct,
                                 thinking={"type": "enabled"})  # fmt: skip
            history: list[Message] = [UserMessage(content="Hi")]
            for n in range(3):
                if n == 1:  # the next call's new messages hold a turn without reasoning
                    history += [AssistantMessage(content=None, tool_calls=(call,), origin=other),
                                ToolMessage(tool_call_id="call_0", content="x")]  # fmt: skip
                reply = await model.complete(ModelRequest(messages=tuple(history)))
                history += [reply.message, *(ToolMessage(tool_call_id=c.id, content="y")
                                             for c in reply.message.calls)]  # fmt: skip
        assert counting.reached == (1 if direct else 3)
        sent[direct] = wire(server.requests)
    assert sent[True] == sent[False]
    last = json.loads(sent[True][2][2])["messages"]
    assert [m.get("reasoning_content") for m in last if m["role"] == "assistant"] == [
        "Look.",
        " ",
        "Look.",
    ]
