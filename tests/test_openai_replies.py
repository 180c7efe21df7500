"""Replies of every shape on the fast path (`provider_path.py`): over real HTTP to a model
server on 127.0.0.1, every reply below is read and priced exactly as litellm's own path reads
and prices it (text, calls, reasoning in the text or its own field, cached and reasoning
tokens, log probabilities, empty call ids, a proxy's cost header, tiers, unpriced models)."""

from __future__ import annotations

import copy
from typing import Any

import provider_replies as pr
import pytest
from model_server import raw_reply, serve
from thin_support import Counting

from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
MODEL = "gpt-4o-mini-2024-07-18"
CALL = pr._function("call_Qw3rTy", "read_file", {"path": "a.md"})
OTHER = pr._function("call_Zx8cVb", "read_file", {"path": "b.md"})


def _edited(body: dict[str, Any], *path: str | int, value: Any = None, drop: bool = False) -> Any:
    edited = copy.deepcopy(body)
    place = edited
    for key in path[:-1]:
        place = place[key]
    if drop:
        del place[path[-1]]
    else:
        place[path[-1]] = value
    return edited


TEXT = pr.openai(MODEL, text="Done.")
PLAIN: dict[str, Any] = {
    "text": TEXT,
    "a tool call": pr.openai(MODEL, CALL),
    "two calls and text": pr.openai(MODEL, CALL, OTHER, text="Reading both."),
    "calls beside an empty text": pr.openai(MODEL, CALL, text=""),
    "calls said to stop": _edited(
        pr.openai(MODEL, CALL), "choices", 0, "finish_reason", value="stop"
    ),
    "cut at the length limit": _edited(TEXT, "choices", 0, "finish_reason", value="length"),
    "filtered": _edited(TEXT, "choices", 0, "finish_reason", value="content_filter"),
    "a tag inside the text": pr.openai(MODEL, text="Use a < b, and <b>bold</b>."),
    "no text": pr.openai(MODEL, text=None),
    "counts without details": _edited(
        TEXT, "usage", value={"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}
    ),
    "no fingerprint": _edited(TEXT, "system_fingerprint", value=None),
    "no annotations or refusal": _edited(
        _edited(TEXT, "choices", 0, "message", "annotations", drop=True),
        "choices",
        0,
        "message",
        "refusal",
        drop=True,
    ),
    "arguments not JSON": _edited(
        pr.openai(MODEL, CALL),
        "choices",
        0,
        "message",
        "tool_calls",
        0,
        "function",
        "arguments",
        value="{path:",
    ),
}
NOT_PLAIN: dict[str, Any] = {
    "reasoning in the text": pr.openai(MODEL, text="<think>Easy.</think>Done."),
    "reasoning content": _edited(TEXT, "choices", 0, "message", "reasoning_content", value="Easy."),
    "cached tokens": pr.openai(MODEL, text="Done.", cached=1920),
    "reasoning tokens": pr.openai(MODEL, text="Done.", reasoning=64),
    "log probabilities": _edited(
        TEXT, "choices", 0, "logprobs", value={"content": [], "refusal": None}
    ),
    "an empty call id": pr.openai(MODEL, pr._function("", "read_file", {"path": "a.md"})),
    "a call with more keys": pr.openai(MODEL, {**CALL, "index": 0}),
    "parallel calls packed in one": pr.openai(
        MODEL, pr._function("call_P", "multi_tool_use.parallel", {"tool_uses": []})
    ),
    "a provider's own field": {**TEXT, "x_groq": {"id": "req_01"}},
    "no finish reason": _edited(TEXT, "choices", 0, "finish_reason", value=None),
    "a refusal": _edited(TEXT, "choices", 0, "message", "refusal", value="I can't."),
    "annotations": _edited(
        TEXT,
        "choices",
        0,
        "message",
        "annotations",
        value=[
            {
                "type": "url_citation",
                "url_citation": {
                    "url": "https://a.example",
                    "title": "A",
                    "start_index": 0,
                    "end_index": 4,
                },
            }
        ],
    ),
    "no usage": _edited(TEXT, "usage", drop=True),
    "another model": pr.openai("gpt-4o-mini-2025-01-01", text="Done."),
    "another service tier": pr.openai(MODEL, text="Done.", service_tier="flex"),
    "two choices": {**TEXT, "choices": [TEXT["choices"][0], {**TEXT["choices"][0], "index": 1}]},
    "a prompt over the smallest tier": pr.openai(MODEL, text="Done.", prompt=40_000),
}


async def _read(
    body: dict[str, Any], *, direct: bool, name: str = "openai/gpt-4o-mini",
    headers: tuple[tuple[str, str], ...] = (), first: dict[str, Any] = TEXT,
) -> tuple[ModelResponse, int]:  # fmt: skip
    """`body` as the reply to a second call (after a plain `first`): how it was read and
    how many calls reached `litellm.acompletion`."""
    with serve(raw_reply(first), raw_reply(body, headers=headers)) as server:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct)
        request = ModelRequest(messages=(UserMessage(content="Read a.md"),), tools=(READ_FILE,))
        with Counting() as count:
            await model.complete(request)
            return await model.complete(request), count.reached


@pytest.mark.parametrize("case", PLAIN)
async def test_a_reply_is_read_and_priced_as_litellm_reads_it(case: str) -> None:
    own, _ = await _read(PLAIN[case], direct=False)
    thin, reached = await _read(PLAIN[case], direct=True)
    assert reached == 1
    assert thin == own
    assert thin.model_dump(exclude_unset=True) == own.model_dump(exclude_unset=True)
    assert thin.usage.cost_usd
    assert thin.response_id == PLAIN[case]["id"]


@pytest.mark.parametrize("case", NOT_PLAIN)
async def test_a_reply_of_any_other_shape_is_read_as_litellm_reads_it(case: str) -> None:
    own, _ = await _read(NOT_PLAIN[case], direct=False)
    thin, reached = await _read(NOT_PLAIN[case], direct=True)
    assert reached == 1
    assert thin == own


async def test_a_proxys_cost_header_is_litellms_price() -> None:
    headers = (("x-litellm-response-cost", "0.0042"),)
    own, _ = await _read(TEXT, direct=False, headers=headers)
    thin, _ = await _read(TEXT, direct=True, headers=headers)
    assert thin == own
    assert thin.usage.cost_usd == 0.0042


async def test_an_unpriced_model_stays_unpriced() -> None:
    unknown = pr.openai("my-own-model", text="Done.")
    own, _ = await _read(unknown, direct=False, name="openai/my-own-model", first=unknown)
    thin, reached = await _read(unknown, direct=True, name="openai/my-own-model", first=unknown)
    assert reached == 1
    assert thin == own
    assert (thin.usage.cost_usd, thin.usage.unpriced) == (None, 1)


async def test_a_price_registered_later_is_the_price() -> None:
    litellm = _import_litellm()
    name = "loopstate-test-priced-later"  # its own name: a registration lasts the process
    price = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
             "litellm_provider": "openai", "mode": "chat"}  # fmt: skip
    litellm.register_model({name: price})
    body = pr.openai(name, text="Done.")
    with serve(raw_reply(body), raw_reply(body), raw_reply(body)) as server:
        model = LiteLLMModel(f"openai/{name}", api_base=server.openai_base, api_key="k")
        request = ModelRequest(messages=(UserMessage(content="Read a.md"),))
        with Counting() as count:
            first, second = [await model.complete(request) for _ in range(2)]
            litellm.register_model({name: {**price, "input_cost_per_token": 1e-3}})
            third = await model.complete(request)
    assert count.reached == 1
    assert first.usage == second.usage
    assert second.usage.cost_usd == 2006 * 1e-6 + 300 * 2e-6
    assert third.usage.cost_usd == 2006 * 1e-3 + 300 * 2e-6
