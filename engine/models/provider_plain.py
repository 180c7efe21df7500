"""A plain reply read straight from its JSON and priced at per-token rates: the
`ModelResponse` that the config's `transform_response`, `read_reply` and
`litellm.completion_cost` make of it, without litellm's reply object or its cost calculator
(two thirds of a call's CPU above a raw POST).

Plain is narrow: one choice of an assistant's text (not opening a reasoning tag) and function
calls (string arguments; an empty id and `extra_content` kept as Gemini's OpenAI-compatible
endpoint sends them), or Anthropic's text and tool-use blocks; usage of
token counts only (nothing cached, written to the cache or reasoned); no proxy's price.
`ProviderPath` reads a reply this way only once this reading gave the first reply of the same
model and tier exactly what litellm's gave it (`learn`), and any other reply through litellm.

`Rates`: litellm prices such a reply of one model at a rate per prompt and per completion
token while the prompt stays under the cost map's smallest tier (32k tokens in litellm 1.110).
They are found with the path's own `completion_cost` on the first reply under other usages
(1/0, 0/1, 0/0 and a probe), kept only if they give those and the reply's own cost to the
bit, and used while the cost map's entries for the model stay as they were.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopstate.engine.messages import AssistantMessage, FunctionCall, Origin, ToolCall
from loopstate.engine.model import ModelResponse, Usage

COST_HEADER = "x-litellm-response-cost"  # a LiteLLM proxy's price, which litellm takes
_TOP = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier",
     "x_groq"}  # Groq's request id, which litellm's reading drops
)  # fmt: skip
_CHOICE = frozenset({"index", "message", "finish_reason", "logprobs"})
_EXTRA = frozenset({"extra_content"})  # a call's own field (Gemini's thought signature)
_CALL = frozenset({"id", "type", "function"})
_MESSAGE = frozenset({"role", "content", "tool_calls", "refusal", "annotations", "function_call"})
_FINISH = frozenset({"stop", "tool_calls", "length", "content_filter"})
_USAGE = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
     "completion_tokens_details", "input_tokens", "output_tokens", "service_tier",
     "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation"}
)  # fmt: skip
_ANTHROPIC_TOP = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)
ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_TIER = re.compile(r"above_(\d+)k_tokens")
_PROBE = (1234, 567)


@dataclass(frozen=True)
class Rates:
    """litellm's price per prompt and completion token of one model's plain replies (None:
    it cannot price them), for replies of at most `bound` tokens, while the cost map holds
    `prices` under `names`."""

    per_token: tuple[float, float] | None
    bound: int
    names: tuple[str, ...]
    prices: tuple[Any, ...]

    def holds(self, model_cost: dict[str, Any]) -> bool:
        return all(model_cost.get(n) == p for n, p in zip(self.names, self.prices, strict=True))

    def cost(self, prompt: int, completion: int) -> float | None:
        if self.per_token is None:
            return None
        return prompt * self.per_token[0] + completion * self.per_token[1]


UNPRICED = Rates(None, 2**62, (), ())
"""No rates: only whether a reply is plain is asked."""


def find_rates(
    litellm: Any, raw: Any, names: tuple[str, ...], price: Callable[[Any], float | None]
) -> Rates | None:
    """The rates `price` (litellm's pricing of a reply) gives `raw` (litellm's own reply)
    under other usages, or None: they are not linear, or miss `raw`'s own cost."""
    usage = raw.usage
    given = price(raw)

    def at(prompt: int, completion: int) -> float | None:
        total = prompt + completion
        raw.usage = litellm.Usage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=total
        )
        return price(raw)

    try:
        zero, per_prompt, per_completion, probe = (at(*c) for c in ((0, 0), (1, 0), (0, 1), _PROBE))
    finally:
        raw.usage = usage
    bound = smallest_tier(litellm.model_cost)
    costs = litellm.model_cost
    snapshot = tuple(dict(e) if isinstance(e := costs.get(n), dict) else e for n in names)
    if any("off_peak_pricing" in e for e in snapshot if isinstance(e, dict)):
        return None  # priced by the hour of the call: litellm prices each reply
    if zero is per_prompt is per_completion is probe is None:
        rates = Rates(None, bound, names, snapshot)
    elif zero == 0.0 and isinstance(per_prompt, float) and isinstance(per_completion, float):
        rates = Rates((per_prompt, per_completion), bound, names, snapshot)
    else:
        return None
    own = (getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))
    return rates if rates.cost(*_PROBE) == probe and rates.cost(*own) == given else None


_tiers: tuple[int, int, int] | None = None  # the cost map's id and size, its smallest tier


def smallest_tier(model_cost: dict[str, Any]) -> int:
    """The fewest tokens at which any model of litellm's cost map changes its per-token price
    (`..._above_128k_tokens` keys, `tiered_pricing` ranges); computed again only if the map
    was replaced or grew."""
    global _tiers
    if _tiers is not None and _tiers[:2] == (id(model_cost), len(model_cost)):
        return _tiers[2]
    bounds = [32_000]
    for entry in model_cost.values():
        if isinstance(entry, dict):
            bounds += [int(n) * 1000 for key in entry for n in _TIER.findall(key)]
            for tier in entry.get("tiered_pricing") or ():
                span = tier.get("range") if isinstance(tier, dict) else None
                if isinstance(span, list | tuple):
                    bounds += [int(b) for b in span if isinstance(b, int | float) and b > 0]
    _tiers = (id(model_cost), len(model_cost), min(bounds))
    return _tiers[2]


def plain_reply(
    body: dict[str, Any], rates: Rates, origin: Origin, anthropic: bool, reply_id: str | None
) -> ModelResponse | None:
    """`body` (a reply's JSON) read and priced as litellm would, or None: not plain."""
    counts = read_counts(body.get("usage"))
    if counts is None or sum(counts) > rates.bound:
        return None
    read = _anthropic(body, origin) if anthropic else _openai(body, origin)
    if read is None:
        return None
    message, finish = read
    usage, model = priced_usage(counts, rates), body["model"]
    return ModelResponse(
        message=message, usage=usage, model=model, finish_reason=finish, response_id=reply_id
    )


def _openai(body: dict[str, Any], origin: Origin) -> tuple[AssistantMessage, str] | None:
    choices = body.get("choices")
    if not body.keys() <= _TOP or not isinstance(choices, list) or len(choices) != 1:
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or not choice.keys() <= _CHOICE or choice.get("logprobs"):
        return None
    message, finish = choice.get("message"), choice.get("finish_reason")
    if not isinstance(message, dict) or not message.keys() <= _MESSAGE or finish not in _FINISH:
        return None
    if message.get("role") != "assistant" or any(
        message.get(k) for k in ("refusal", "annotations", "function_call")
    ):
        return None
    content = message.get("content")
    if not (content is None or (type(content) is str and not content.startswith("<"))):
        return None
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or call.keys() - _EXTRA != _CALL:
            return None
        extra = {k: call[k] for k in _EXTRA if call.get(k) is not None}
        made = read_call(
            call["id"], function.get("name"), function.get("arguments"), extra, empty=True
        )
        if made is None or call["type"] != "function" or function.keys() != {"name", "arguments"}:
            return None
        calls.append(made)
    finish = "tool_calls" if finish == "stop" and calls else finish
    return assistant(content, calls, origin), finish


def _anthropic(body: dict[str, Any], origin: Origin) -> tuple[AssistantMessage, str] | None:
    content, finish = body.get("content"), ANTHROPIC_FINISH.get(str(body.get("stop_reason")))
    if not body.keys() <= _ANTHROPIC_TOP or body.get("type") != "message" or finish is None:
        return None
    if body.get("role") != "assistant" or not isinstance(content, list):
        return None
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            return None
        if block.keys() == {"type", "text"} and type(block["text"]) is str:
            texts.append(block["text"])
            continue
        given = block.get("input")
        made = read_call(block.get("id"), block.get("name"), json.dumps(given))
        if made is None or block.keys() != {"type", "id", "name", "input"}:
            return None
        if block["type"] != "tool_use" or not isinstance(given, dict):
            return None
        calls.append(made)
    return assistant("".join(texts) or None, calls, origin), finish


def read_call(
    call_id: Any, name: Any, arguments: Any, extra: Any = None, *, empty: bool = False
) -> ToolCall | None:
    """A call read (`extra`: its own fields, kept); None: not plain (`empty`: its id may be
    empty, as Gemini's OpenAI-compatible calls' are)."""
    if not (type(call_id) is type(name) is type(arguments) is str) or not (call_id or empty):
        return None
    if name == "multi_tool_use.parallel":  # litellm unpacks such a call into several
        return None
    function = FunctionCall(name=name, arguments=arguments)
    return ToolCall(id=call_id, function=function, provider_fields=extra or None)


def assistant(content: str | None, calls: list[ToolCall], origin: Origin) -> AssistantMessage:
    return AssistantMessage(
        content=content, tool_calls=tuple(calls) or None, reasoning=None,
        reasoning_field=None, thinking_blocks=None, provider_fields=None, origin=origin,
    )  # fmt: skip


def priced_usage(counts: tuple[int, int], rates: Rates) -> Usage:
    cost = rates.cost(*counts)
    return Usage(
        prompt_tokens=counts[0], completion_tokens=counts[1], cached_tokens=0,
        cache_creation_tokens=0, reasoning_tokens=0, cost_usd=cost,
        unpriced=1 if cost is None else 0,
    )  # fmt: skip


def read_counts(usage: Any) -> tuple[int, int] | None:
    """The prompt and completion tokens of a usage of counts only, nothing in its details."""
    if not isinstance(usage, dict) or not usage.keys() <= _USAGE:
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if type(prompt) is not int or type(completion) is not int or min(prompt, completion) < 0:
        return None
    if usage.get("service_tier") not in (None, "standard"):
        return None
    for name in ("prompt_tokens_details", "completion_tokens_details", "cache_creation"):
        details = usage.get(name)
        if details is not None and not (
            isinstance(details, dict) and all(v is None or v == 0 for v in details.values())
        ):
            return None
    cached = usage.get("cache_creation_input_tokens"), usage.get("cache_read_input_tokens")
    return None if any(cached) else (prompt, completion)
