"""An Anthropic reply litellm prices by its token counts alone is priced at the rates its
calculator gave the shape's first reply (`openai_plain.Linear`), without running it again;
any other (thinking, cache reads or writes, another tier, server tools, a proxy's price) is
priced by litellm. Each cost is compared with litellm's own path over real HTTP."""

from __future__ import annotations

from typing import Any

import provider_replies as pr
import pytest
from model_server import raw_reply
from test_anthropic_thin_path import _calls, _compare

from loopstate.engine.model import ModelResponse
from loopstate.engine.models.litellm import _import_litellm

USAGE = {
    "input_tokens": 612, "output_tokens": 48, "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0, "service_tier": "standard",
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
}  # fmt: skip
TOOL_USE = {"type": "tool_use", "id": "toolu_01D", "name": "read_file", "input": {"path": "a"}}


def _reply(*content: dict[str, Any], **usage: Any) -> dict[str, Any]:
    body = pr.anthropic_text("Done.")
    body["usage"] = {**USAGE, **usage}
    if content:
        body["content"], body["stop_reason"] = list(content), "tool_use"
    return body


BY_RATES = {
    "text": pr.anthropic_text("Done."),
    "text, real usage block": _reply(),
    "text and a tool use": _reply({"type": "text", "text": "Reading."}, TOOL_USE),
}
BY_LITELLM = {
    "thinking": pr.anthropic_thinking_tool_use(),
    "thinking, nothing cached": _reply(pr.anthropic_thinking_tool_use()["content"][0], TOOL_USE),
    "a cache read": _reply(cache_read_input_tokens=2048),
    "a cache write": _reply(cache_creation_input_tokens=1024),
    "the priority tier": _reply(service_tier="priority"),
    "a web search": _reply(server_tool_use={"web_search_requests": 1}),
}


@pytest.fixture
def calculated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times litellm's cost calculator ran."""
    litellm, runs = _import_litellm(), []
    original = litellm.response_cost_calculator

    def counted(**arguments: Any) -> Any:
        runs.append(1)
        return original(**arguments)

    monkeypatch.setattr(litellm, "response_cost_calculator", counted)
    return runs


async def _calculated_for_one_call_more(body: dict[str, Any], calculated: list[int]) -> int:
    """How many times litellm's calculator ran for a thin call of `body`: the runs of three
    calls (a first through litellm, then two thin) less those of two."""
    counts = []
    for calls in (2, 3):
        before = len(calculated)
        await _calls([raw_reply(body)] * (calls - 1), direct=True)
        counts.append(len(calculated) - before)
    return counts[1] - counts[0]


@pytest.mark.parametrize("case", BY_RATES)
async def test_a_reply_of_counts_only_costs_litellms_price_at_its_rates(
    case: str, calculated: list[int]
) -> None:
    thin = await _compare([raw_reply(BY_RATES[case])] * 2)  # the same costs as litellm's path
    assert isinstance(thin[-1], ModelResponse)
    assert thin[-1].usage.cost_usd
    assert await _calculated_for_one_call_more(BY_RATES[case], calculated) == 0


@pytest.mark.parametrize("case", BY_LITELLM)
async def test_any_other_reply_is_priced_by_litellm(case: str, calculated: list[int]) -> None:
    await _compare([raw_reply(BY_LITELLM[case])] * 2)
    assert await _calculated_for_one_call_more(BY_LITELLM[case], calculated) == 1


async def test_a_proxys_cost_header_is_the_price(calculated: list[int]) -> None:
    reply = raw_reply(_reply(), headers=(("x-litellm-response-cost", "0.0042"),))
    thin = await _compare([reply])
    assert isinstance(thin[-1], ModelResponse)
    assert thin[-1].usage.cost_usd == 0.0042
