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

from loopstate.engine.models.litellm_reply import usage_of
from loopstate.engine.models.openai_plain import COST_HEADER, Linear, smallest_tier

# A reply's hidden fields when litellm prices it (timings aside, which pricing never reads).
_AT_PRICING = frozenset({"custom_llm_provider", "region_name", "headers", "additional_headers"})
_NO_BUILT_IN_TOOLS = {"web_search_options": None, "file_search": None}
_tiers: tuple[int, int, int] | None = None  # the cost map's id and size, its smallest tier


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


def set_price(
    litellm: Any, raw: Any, name: str, provider: str, optional: dict[str, Any],
    linear: tuple[Linear, tuple[int, int]] | None = None,
) -> None:  # fmt: skip
    """Price a reply read by a thin path and keep the cost where litellm keeps it: at the
    shape's `linear` rates for these counts (a plain reply's) where they hold, else by
    litellm."""
    hidden = raw._hidden_params
    hidden.setdefault("custom_llm_provider", provider)
    hidden.setdefault("region_name", None)
    if linear is not None and linear[0].applies(raw, linear[1], litellm.model_cost):
        hidden["response_cost"] = linear[0].cost(*linear[1])
    else:
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


def linear_price(
    litellm: Any, raw: Any, name: str, provider: str, optional: dict[str, Any]
) -> Linear | None:
    """The per-token rates litellm prices `raw`'s shape at (`openai_plain.Linear`), found with
    `price` on `raw` (litellm's own reply, already priced) under other usages; None if none
    hold, or litellm took the reply's price from a proxy's header."""
    hidden = getattr(raw, "_hidden_params", None)
    if not isinstance(hidden, dict) or _by_header(hidden):
        return None
    usage, counted = raw.usage, usage_of(raw)
    details = counted.cached_tokens or counted.cache_creation_tokens or counted.reasoning_tokens
    own = None if details else (counted.prompt_tokens, counted.completion_tokens)

    def at(prompt: int, completion: int) -> float | None:
        raw.usage = litellm.Usage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
        return price(litellm, raw, name, provider, optional)

    raw._hidden_params = {k: v for k, v in hidden.items() if k in _AT_PRICING}
    try:
        found = Linear.of(raw, own, hidden.get("response_cost"), at, _smallest_tier(litellm))
    finally:
        raw.usage, raw._hidden_params = usage, hidden
    return found and found.looked_up(litellm.model_cost, name, provider)


def _by_header(hidden: dict[str, Any]) -> bool:
    names = [*(hidden.get("headers") or {}), *(hidden.get("additional_headers") or {})]
    return any(str(name).lower().endswith(COST_HEADER) for name in names)


def _smallest_tier(litellm: Any) -> int:
    """`smallest_tier` of litellm's cost map, computed again only if the map was replaced or
    a model added (`litellm.register_model`)."""
    global _tiers
    costs = litellm.model_cost
    if _tiers is None or _tiers[:2] != (id(costs), len(costs)):
        _tiers = (id(costs), len(costs), smallest_tier(costs))
    return _tiers[2]
