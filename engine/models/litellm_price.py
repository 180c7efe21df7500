"""A reply's cost as `litellm.acompletion` prices it, for replies the thin paths read without
it (`openai_direct.py`). Duck-typed: litellm is passed in, not imported.

litellm prices a reply once, as its response metadata is set: its logging object's
`response_cost_calculator`, which (no cache hit, no price in the reply's hidden fields) calls
`litellm.response_cost_calculator` with the call's model name as given, the provider, the
mapped optional parameters and the built-in tool parameters, on the reply as it is at that
moment: its hidden fields then are the provider, the region and the headers (the provider's
own, and litellm's `llm_provider-` copies, where a LiteLLM proxy's cost header is read first).
The fields litellm adds afterwards (the provider's model name among them) change the price,
so they are kept out while pricing. A failure is an unknown cost, as there.

A thin path keeps a request shape only if `priced_alike` holds for the first call's own
reply (litellm's cost and this one's equal, both unknown included), so a model or setting
priced in a way this does not follow stays on litellm.
"""

from __future__ import annotations

from typing import Any

# A reply's hidden fields when litellm prices it (timings aside, which pricing never reads).
_AT_PRICING = frozenset({"custom_llm_provider", "region_name", "headers", "additional_headers"})
_NO_BUILT_IN_TOOLS = {"web_search_options": None, "file_search": None}


def price(
    litellm: Any, raw: Any, name: str, provider: str, optional: dict[str, Any]
) -> float | None:
    """The cost of `raw` (a reply to model `name` through `provider`), or None: unknown."""
    hidden = getattr(raw, "_hidden_params", None)
    if not isinstance(hidden, dict):
        return None
    cost = hidden.get("response_cost")
    if cost is not None:
        return float(cost)
    try:
        cost = litellm.response_cost_calculator(
            response_object=raw, model=name, custom_llm_provider=provider,
            call_type="acompletion", optional_params=optional, cache_hit=False,
            base_model=None, custom_pricing=False, prompt="",
            standard_built_in_tools_params=dict(_NO_BUILT_IN_TOOLS), router_model_id=None,
            litellm_logging_obj=None, data_residency=None, vertex_location=None,
            region_name=None,
        )  # fmt: skip
    except Exception:  # litellm's logging object turns a pricing failure into no cost too
        return None
    return float(cost) if isinstance(cost, int | float) else None


def set_price(litellm: Any, raw: Any, name: str, provider: str, optional: dict[str, Any]) -> None:
    """Price a reply read by a thin path and keep the cost where litellm keeps it."""
    hidden = raw._hidden_params
    hidden.setdefault("custom_llm_provider", provider)
    hidden.setdefault("region_name", None)
    hidden["response_cost"] = price(litellm, raw, name, provider, optional)


def priced_alike(
    litellm: Any, raw: Any, name: str, provider: str, optional: dict[str, Any]
) -> bool:
    """Whether `price` gives `raw` (litellm's own reply, already priced) litellm's cost."""
    hidden = getattr(raw, "_hidden_params", None)
    if not isinstance(hidden, dict):
        return False
    given = hidden.get("response_cost")
    raw._hidden_params = {k: v for k, v in hidden.items() if k in _AT_PRICING}
    try:
        ours = price(litellm, raw, name, provider, optional)
    finally:
        raw._hidden_params = hidden
    if given is None or ours is None:
        return given is None and ours is None
    return bool(float(given) == ours)
