"""litellm prices a plain reply linearly in its token counts below the smallest tier of its
cost map (`openai_plain.Linear`): checked against litellm's own calculator for every OpenAI
chat model in litellm's map and a sample of every other provider's, at usages up to the bound;
and refused where it does not hold or cannot be known."""

from __future__ import annotations

from typing import Any

import pytest

from loopstate.engine.models.litellm import _import_litellm
from loopstate.engine.models.litellm_price import linear_price, price
from loopstate.engine.models.openai_plain import smallest_tier

USAGES = [(1, 1), (17, 3), (999, 0), (0, 4096), (2006, 300), (31_000, 999)]


def _chat_models(every_other: int) -> list[str]:
    costs = _import_litellm().model_cost
    chat = [n for n, e in costs.items() if isinstance(e, dict) and e.get("mode") == "chat"]
    openai = [n for n in chat if costs[n].get("litellm_provider") == "openai"]
    return openai + [n for n in chat if n not in openai][::every_other]


def _reply(model: str, prompt: int, completion: int, **hidden: Any) -> Any:
    """A reply as litellm's own path hands it to pricing."""
    litellm = _import_litellm()
    raw = litellm.ModelResponse(
        model=model,
        choices=[{"message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}],
        usage={"prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion},
    )  # fmt: skip
    raw._hidden_params = {"custom_llm_provider": "openai", "region_name": None, "headers": {},
                          "additional_headers": {}, **hidden}  # fmt: skip
    return raw


def _priced(model: str, prompt: int, completion: int) -> float | None:
    return price(_import_litellm(), _reply(model, prompt, completion), f"openai/{model}",
                 "openai", {})  # fmt: skip


def test_the_rates_found_are_litellms_price_at_every_usage_below_the_bound() -> None:
    litellm, found = _import_litellm(), 0
    bound = smallest_tier(litellm.model_cost)
    for model in _chat_models(every_other=200):
        given = _priced(model, 2006, 300)
        raw = _reply(model, 2006, 300, response_cost=given)
        linear = linear_price(litellm, raw, f"openai/{model}", "openai", {})
        if linear is None:
            continue
        found += 1
        assert linear.bound == bound
        for prompt, completion in [*USAGES, (linear.bound - 1, 1)]:
            assert linear.cost(prompt, completion) == _priced(model, prompt, completion), model
    assert found > 110


def test_the_bound_is_below_every_tier_of_the_map() -> None:
    costs = _import_litellm().model_cost
    bound = smallest_tier(costs)
    assert bound <= 32_000
    tiered = [e for e in costs.values() if isinstance(e, dict) and e.get("tiered_pricing")]
    assert tiered
    assert all(
        t["range"][0] == 0 or t["range"][0] >= bound
        for e in tiered
        for t in e["tiered_pricing"]
        if isinstance(t.get("range"), list)
    )
    assert smallest_tier({"m": {"input_cost_per_token_above_8k_tokens": 1e-6}}) == 8_000
    assert smallest_tier({"m": {"tiered_pricing": [{"range": [0, 4000.0]}]}}) == 4_000


@pytest.mark.parametrize(
    "hidden",
    [{"additional_headers": {"llm_provider-x-litellm-response-cost": "0.0042"}},
     {"headers": {"X-LiteLLM-Response-Cost": "0.0042"}}],
)  # fmt: skip
def test_a_price_from_a_proxys_header_has_no_rates(hidden: dict[str, Any]) -> None:
    litellm = _import_litellm()
    raw = _reply("gpt-4o-mini", 2006, 300, response_cost=0.0042, **hidden)
    assert linear_price(litellm, raw, "openai/gpt-4o-mini", "openai", {}) is None


def test_a_reply_litellm_priced_otherwise_has_no_rates() -> None:
    litellm = _import_litellm()
    raw = _reply("gpt-4o-mini", 2006, 300, response_cost=0.5)  # not what the rates give
    assert linear_price(litellm, raw, "openai/gpt-4o-mini", "openai", {}) is None
    raw = _reply("gpt-4o-mini", 2006, 300, response_cost=_priced("gpt-4o-mini", 2006, 300))
    assert linear_price(litellm, raw, "openai/gpt-4o-mini", "openai", {}) is not None
