"""Priced models on the thin path (`openai_direct.py`, `litellm_price.py`): after the first
call, the same requests skip `litellm.acompletion` and every reply costs what litellm's own
path makes it cost — prompt caching, reasoning tokens, the flex tier, a LiteLLM proxy's cost
header, a model name another provider also prices — over real HTTP to a model server on
127.0.0.1 answering with OpenAI-shaped bodies; streamed too."""

from __future__ import annotations

from typing import Any

import provider_replies as pr
import pytest
from model_server import Reply, raw_reply, raw_stream, serve, text_reply
from thin_support import Counting

from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm
from loopstate.engine.streaming import DeltaListener

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
CALL = pr._function("call_Qw3rTy", "read_file", {"path": "a.md"})
# (model name as configured, reply body, extra response headers)
CASES: dict[str, tuple[str, dict[str, Any], tuple[tuple[str, str], ...]]] = {
    "gpt-4o-mini": ("openai/gpt-4o-mini", pr.openai("gpt-4o-mini-2024-07-18", CALL), ()),
    "prompt caching": (
        "openai/gpt-4o-mini",
        pr.openai("gpt-4o-mini-2024-07-18", text="Done.", cached=1920),
        (),
    ),
    "reasoning tokens": (
        "openai/o4-mini",
        pr.openai("o4-mini-2025-04-16", CALL, reasoning=192, cached=1024),
        (),
    ),
    "flex tier": (
        "openai/o4-mini",
        pr.openai("o4-mini-2025-04-16", text="Slow.", reasoning=64, service_tier="flex"),
        (),
    ),
    "litellm proxy cost header": (
        "openai/gpt-4o",
        pr.openai("gpt-4o-2024-08-06", text="Via the proxy."),
        (("x-litellm-response-cost", "0.0042"),),
    ),
    "a name another provider prices": (
        "openai/deepseek-chat",
        pr.deepseek("Look.", pr.deepseek_call(0, "a.md")),
        (),
    ),
    "unpriced": ("openai/test-model", pr.openai("test-model", text="Who knows."), ()),
}
# litellm prices neither (its own path leaves their cost unknown too: compared below).
UNPRICED = {"a name another provider prices", "unpriced"}


class _Quiet(DeltaListener):
    async def text(self, delta: str) -> None:
        pass

    async def tool_call(
        self, index: int, call_id: str | None, name: str | None, arguments: str
    ) -> None:
        pass


async def _replies(
    name: str, replies: list[Reply], *, direct: bool, stream: bool
) -> tuple[list[ModelResponse], int]:
    """Each reply answered to the same request after a first call: the replies read and how
    many calls reached `litellm.acompletion`."""
    first = raw_stream(pr.openai("x", text="First.")) if stream else text_reply("First.")
    out: list[ModelResponse] = []
    with serve(first, *replies) as server:
        model = LiteLLMModel(name, api_base=server.openai_base, api_key="k", direct=direct)
        request = ModelRequest(
            messages=(UserMessage(content="Read a.md"),), tools=(READ_FILE,), step=1
        )
        with Counting() as count:
            for _ in range(len(replies) + 1):
                call = model.stream(request, _Quiet()) if stream else model.complete(request)
                out.append(await call)
    return out, count.reached


@pytest.mark.parametrize("case", CASES)
async def test_a_thin_reply_costs_what_litellms_own_path_makes_it_cost(case: str) -> None:
    name, body, headers = CASES[case]
    replies = [raw_reply(body, headers=headers), raw_reply(body, headers=headers)]
    own, own_reached = await _replies(name, replies, direct=False, stream=False)
    thin, thin_reached = await _replies(name, replies, direct=True, stream=False)
    assert own_reached == 3
    assert thin_reached == 1  # priced or not, every later call took the thin path
    assert thin == own
    assert (thin[-1].usage.cost_usd is None) == (case in UNPRICED)


async def test_the_cost_follows_each_replys_own_usage() -> None:
    name, body, _ = CASES["prompt caching"]
    cold = pr.openai("gpt-4o-mini-2024-07-18", text="Done.", cached=0)
    replies = [raw_reply(cold), raw_reply(body)]
    thin, reached = await _replies(name, replies, direct=True, stream=False)
    assert reached == 1
    litellm = _import_litellm()
    prices = litellm.model_cost["gpt-4o-mini"]
    uncached = 2006 * prices["input_cost_per_token"] + 300 * prices["output_cost_per_token"]
    assert thin[1].usage.cost_usd == pytest.approx(uncached)
    assert thin[2].usage.cost_usd is not None
    assert thin[2].usage.cost_usd < uncached  # 1,920 of the prompt's tokens read from cache
    assert thin[2].usage.cached_tokens == 1920


STREAMED = ["gpt-4o-mini", "reasoning tokens", "a name another provider prices", "unpriced"]


@pytest.mark.parametrize("case", STREAMED)
async def test_a_streamed_thin_reply_costs_what_litellms_stream_makes_it_cost(case: str) -> None:
    name, body, _ = CASES[case]
    replies = [raw_stream(body), raw_stream(body)]
    own, own_reached = await _replies(name, replies, direct=False, stream=True)
    thin, thin_reached = await _replies(name, replies, direct=True, stream=True)
    assert own_reached == 3
    assert thin_reached == 1
    assert thin == own
    assert (thin[-1].usage.cost_usd is None) == (case in UNPRICED)


async def test_custom_prices_keep_every_call_on_litellm() -> None:
    with serve(text_reply("One."), text_reply("Two.")) as server:
        model = LiteLLMModel("openai/my-model", api_base=server.openai_base, api_key="k",
                             input_cost_per_token=0.001, output_cost_per_token=0.002)  # fmt: skip
        request = ModelRequest(messages=(UserMessage(content="hi"),), step=1)
        with Counting() as count:
            replies = [await model.complete(request) for _ in range(2)]
    assert count.reached == 2
    assert [r.usage.cost_usd for r in replies] == [pytest.approx(0.025)] * 2


async def test_a_price_changed_in_litellms_cost_map_is_followed_on_the_fast_path() -> None:
    """The per-token rates a plain reply is priced at hold only while litellm's cost map
    holds the prices they were found with (`litellm.register_model` may change them)."""
    plain = pr.openai("gpt-4o-mini-2024-07-18", text="Done.", cached=0)
    litellm = _import_litellm()
    names = ("gpt-4o-mini", "gpt-4o-mini-2024-07-18")
    kept = {n: dict(litellm.model_cost[n]) for n in names}
    request = ModelRequest(messages=(UserMessage(content="Read a.md"),), step=1)
    costs = []
    try:
        with serve(*(raw_reply(plain) for _ in range(4))) as server:
            model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.openai_base, api_key="k")
            for turn in range(4):
                if turn == 3:  # the rates were found (turn 1) and used (turn 2)
                    litellm.register_model(
                        {n: {**kept[n], "input_cost_per_token": 2 * kept[n]["input_cost_per_token"]}
                         for n in names}
                    )  # fmt: skip
                costs.append((await model.complete(request)).usage.cost_usd)
    finally:
        litellm.register_model(kept)
    prices = kept["gpt-4o-mini-2024-07-18"]
    before = 2006 * prices["input_cost_per_token"] + 300 * prices["output_cost_per_token"]
    assert costs[:3] == [pytest.approx(before)] * 3
    assert costs[3] == pytest.approx(before + 2006 * prices["input_cost_per_token"])
