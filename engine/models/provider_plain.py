"""A plain reply read straight from its JSON and priced at per-token rates: the
`ModelResponse` that the config's `transform_response`, `read_reply` and
`litellm.completion_cost` make of it, at a fraction of their CPU. Plain: one choice of text
(not opening a reasoning tag), reasoning (`reasoning_content`, `reasoning`) and function calls
(Gemini's empty ids and `extra_content` kept), or Anthropic's text and tool uses; usage of
prompt, cached, completion and reasoning tokens only; no proxy's price. `ProviderPath` reads
a reply so once this reading gave the first reply of its model, tier and `form` exactly what
litellm's gave it (`learn`). `Rates`: litellm's price per uncached, cached, completion and
reasoning token, summed as its `generic_cost_per_token` sums them, below the cost map's
smallest tier; found by `completion_cost` under unit usages, kept if two probes cost the same
to the bit, used while the model's cost map entries stay as they were.
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
     "x_groq", "usage_breakdown"}  # Groq's request id and breakdown, which litellm's reading drops
)  # fmt: skip
_CHOICE = frozenset({"index", "message", "finish_reason", "logprobs"})
_EXTRA = frozenset({"extra_content"})  # a call's own field (Gemini's thought signature)
_CALL = frozenset({"id", "type", "function"})  # and DeepSeek's `index`, which litellm drops
REASONING = ("reasoning_content", "reasoning")
_MESSAGE = frozenset(
    {"role", "content", "tool_calls", "refusal", "annotations", "function_call", *REASONING}
)
_FINISH = frozenset({"stop", "tool_calls", "length", "content_filter"})
_USAGE = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
     "completion_tokens_details", "input_tokens", "output_tokens", "service_tier",
     "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation",
     "prompt_cache_hit_tokens", "prompt_cache_miss_tokens",  # DeepSeek's
     "queue_time", "prompt_time", "completion_time", "total_time"}  # Groq's
)  # fmt: skip
_ANTHROPIC_TOP = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)
ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_TIER = re.compile(r"above_(\d+)k_tokens")
_DETAILS = {  # a usage's details: the one count of each that is read (any other must be 0)
    "prompt_tokens_details": "cached_tokens", "completion_tokens_details": "reasoning_tokens",
    "cache_creation": None,
}  # fmt: skip
_UNITS = ((0, 0, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1))
_PROBES = ((1234, 0, 567, 0), (1234, 321, 567, 89))


@dataclass(frozen=True)
class Rates:
    """litellm's price per uncached prompt, cached prompt, completion and reasoning token of
    one model's plain replies (None: it cannot price them), for replies of at most `bound`
    tokens, while the cost map holds `prices` under `names`."""

    per_token: tuple[float, ...] | None
    bound: int
    names: tuple[str, ...]
    prices: tuple[Any, ...]

    def holds(self, model_cost: dict[str, Any]) -> bool:
        return all(model_cost.get(n) == p for n, p in zip(self.names, self.prices, strict=True))

    def cost(self, prompt: int, cached: int, completion: int, reasoning: int) -> float | None:
        if self.per_token is None:
            return None
        uncached, hit, text, thought = self.per_token
        return ((prompt - cached) * uncached + cached * hit) + (
            (completion - reasoning) * text + reasoning * thought
        )


UNPRICED = Rates(None, 2**62, (), ())
"""No rates: only whether a reply is plain is asked."""


def find_rates(
    litellm: Any, raw: Any, names: tuple[str, ...], price: Callable[[Any], float | None]
) -> Rates | None:
    """The rates `price` (litellm's pricing of a reply) gives `raw` (litellm's own reply)
    under unit usages, or None: they are not linear (miss the probes' costs)."""
    usage = raw.usage

    def at(prompt: int, cached: int, completion: int, reasoning: int) -> float | None:
        raw.usage = litellm.Usage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
            prompt_tokens_details={"cached_tokens": cached} if cached else None,
            completion_tokens_details={"reasoning_tokens": reasoning} if reasoning else None,
        )  # fmt: skip
        return price(raw)

    try:
        zero, *units = (at(*c) for c in _UNITS)
        probes = [at(*c) for c in _PROBES]
    finally:
        raw.usage = usage
    bound = smallest_tier(litellm.model_cost)
    costs = litellm.model_cost
    snapshot = tuple(dict(e) if isinstance(e := costs.get(n), dict) else e for n in names)
    if any("off_peak_pricing" in e for e in snapshot if isinstance(e, dict)):
        return None  # priced by the hour of the call: litellm prices each reply
    if all(c is None for c in (zero, *units, *probes)):
        return Rates(None, bound, names, snapshot)
    per_token = tuple(u for u in units if isinstance(u, float))
    if zero != 0.0 or len(per_token) != len(units):
        return None
    rates = Rates(per_token, bound, names, snapshot)
    return rates if all(rates.cost(*c) == p for c, p in zip(_PROBES, probes, strict=True)) else None


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
    if counts is None or counts[0] + counts[2] > rates.bound:
        return None
    read = _anthropic(body, origin) if anthropic else _openai(body, origin)
    if read is None:
        return None
    message, finish = read
    usage, model = priced_usage(counts, rates), body["model"]
    return ModelResponse.trusted(
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
    thought: list[Any] = [(k, message[k]) for k in REASONING if message.get(k) is not None]
    thought = thought or [(None, None)]
    if len(thought) > 1 or not isinstance(thought[0][1], str | None):
        return None
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or call.keys() - _EXTRA - {"index"} != _CALL:
            return None
        extra = {k: call[k] for k in _EXTRA if call.get(k) is not None}
        made = read_call(
            call["id"], function.get("name"), function.get("arguments"), extra, empty=True
        )
        if made is None or call["type"] != "function" or function.keys() != {"name", "arguments"}:
            return None
        calls.append(made)
    finish = "tool_calls" if finish == "stop" and calls else finish
    return assistant(content, calls, origin, thought[0]), finish


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
    function = FunctionCall.trusted(name=name, arguments=arguments)
    return ToolCall.trusted(id=call_id, function=function, provider_fields=extra or None)


def assistant(
    content: str | None, calls: list[ToolCall], origin: Origin, thought: Any = (None, None)
) -> AssistantMessage:
    """The turn, with its reasoning's wire field and text (`thought`)."""
    return AssistantMessage.trusted(
        content=content, tool_calls=tuple(calls) or None, reasoning=thought[1],
        reasoning_field=thought[0], thinking_blocks=None, provider_fields=None, origin=origin,
    )  # fmt: skip


def priced_usage(counts: tuple[int, int, int, int], rates: Rates) -> Usage:
    cost = rates.cost(*counts)
    return Usage.trusted(
        prompt_tokens=counts[0], completion_tokens=counts[2], cached_tokens=counts[1],
        cache_creation_tokens=0, reasoning_tokens=counts[3], cost_usd=cost,
        unpriced=1 if cost is None else 0,
    )  # fmt: skip


def read_counts(usage: Any) -> tuple[int, int, int, int] | None:
    """The prompt, cached, completion and reasoning tokens of a usage that counts nothing else;
    the cached ones where litellm's `Usage` takes them (DeepSeek's `prompt_cache_hit_tokens`
    first)."""
    if not isinstance(usage, dict) or not usage.keys() <= _USAGE:
        return None
    details = [usage.get(k) or {} for k in _DETAILS]
    if not all(isinstance(d, dict) for d in details) or _more(usage, details):
        return None
    hit = usage.get("prompt_cache_hit_tokens")
    counts: Any = (
        usage.get("prompt_tokens", usage.get("input_tokens")),
        hit if type(hit) is int else details[0].get("cached_tokens") or 0,
        usage.get("completion_tokens", usage.get("output_tokens")),
        details[1].get("reasoning_tokens") or 0,
    )
    if any(type(c) is not int or c < 0 for c in counts):
        return None
    return counts if counts[1] <= counts[0] and counts[3] <= counts[2] else None


def _more(usage: dict[str, Any], details: list[dict[str, Any]]) -> bool:
    """Whether a usage counts more than `read_counts` reads (cache writes, audio, predictions,
    Anthropic's cache fields) or is of a tier of its own."""
    kept = _DETAILS.values()
    more = [n for d, k in zip(details, kept, strict=True) for n, v in d.items() if v and n != k]
    cache = usage.get("cache_creation_input_tokens") or usage.get("cache_read_input_tokens")
    return bool(more or cache) or usage.get("service_tier") not in (None, "standard")


def form(body: dict[str, Any]) -> frozenset[str] | None:
    """What litellm's reading of a reply turns on beyond its values (the message's and calls'
    fields: Groq keeps `reasoning`, others rename it; Mistral's empty text is None)."""
    try:
        message = body["choices"][0]["message"]
        keys = {k for k, v in message.items() if v is not None}
        keys |= {f".{k}" for call in message.get("tool_calls") or () for k in call}
        return frozenset(keys | ({"empty"} if message.get("content") == "" else set()))
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
