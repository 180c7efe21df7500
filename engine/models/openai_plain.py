"""A plain chat completion read straight from its JSON: the `ModelResponse` the thin path's
litellm chain (`openai_direct._send` then `litellm_reply.read_reply`) makes of it, and its cost
as litellm prices it, without building litellm's reply or running its cost calculator
(~0.5 ms of CPU a call each: two thirds of a call's time above a raw POST on a local wire).

Plain is narrow on purpose: one choice; a message with only an assistant role, text that
cannot open a reasoning tag, function calls with non-empty ids and string arguments; a
finish reason litellm keeps as it is; usage of token counts with no cached, reasoning, audio
or other detail counted. For such a reply litellm's chain copies the text, the calls, the
counts, the model and the finish reason (`stop` beside calls becomes `tool_calls`), and
nothing else: tests/test_openai_plain_reply.py compares both readings of every plain reply
and checks that the rest is refused. Any other reply takes litellm's chain.

Its cost: litellm prices a plain reply of one request shape by its token counts, at a rate
per prompt token and per completion token, as long as the prompt stays under the smallest
tier of its cost map (32k tokens in litellm 1.110, where some models start charging more) and
the reply names the same model and service tier. `Linear.of` finds those rates with litellm's
own calculator on the shape's first reply (usage 1/0 and 0/1), and keeps them only if they
also give that reply's cost, no cost for no tokens and a fourth usage's cost, all to the bit
(an unknown cost stays unknown). A reply outside that regime is priced by litellm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from loopstate.engine.messages import AssistantMessage, FunctionCall, Origin, ToolCall
from loopstate.engine.model import ModelResponse, Usage

_TOP = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier"}
)
_CHOICE = frozenset({"index", "message", "finish_reason", "logprobs"})
_NULLABLE = ("refusal", "annotations", "function_call", "audio")
_MESSAGE = frozenset({"role", "content", "tool_calls", *_NULLABLE})
_FINISH = frozenset({"stop", "tool_calls", "length", "content_filter"})
_USAGE = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
     "completion_tokens_details"}
)  # fmt: skip
_CALL = frozenset({"id", "type", "function"})
_FUNCTION = frozenset({"name", "arguments"})
_PARALLEL = "multi_tool_use.parallel"  # litellm unpacks such a call into several
COST_HEADER = "x-litellm-response-cost"  # a LiteLLM proxy's price, which litellm takes
_TIER = re.compile(r"above_(\d+)k_tokens")
_PROBE = (1234, 567)


@dataclass(frozen=True)
class Linear:
    """litellm's price of one request shape's plain replies: `rates` per prompt and per
    completion token (None: litellm cannot price them), for replies naming `model` and
    `tier` with at most `bound` tokens."""

    rates: tuple[float, float] | None
    model: str
    tier: Any
    bound: int
    names: tuple[str, ...] = ()
    """The names litellm may look the reply's price up under in its cost map"""
    prices: tuple[Any, ...] = ()
    """and their entries (copied) when the rates were found: `register_model` may change them."""

    def looked_up(self, model_cost: dict[str, Any], name: str, provider: str) -> Linear:
        """These rates, to be used while the cost map has the same entries for `name` and the
        reply's model (with and without the `provider`) as now."""
        bare = name.split("/", 1)[-1]
        names = tuple(dict.fromkeys((name, bare, self.model, f"{provider}/{self.model}")))
        return replace(self, names=names, prices=self._prices(model_cost, names))

    def applies(self, reply: Any, counts: tuple[int, int], model_cost: dict[str, Any]) -> bool:
        """Whether these rates price `reply` (litellm's, plain, of `counts` tokens)."""
        return (
            getattr(reply, "model", None) == self.model
            and getattr(reply, "service_tier", None) == self.tier
            and sum(counts) <= self.bound
            and self.holds(model_cost)
        )

    def holds(self, model_cost: dict[str, Any]) -> bool:
        return all(model_cost.get(n) == p for n, p in zip(self.names, self.prices, strict=True))

    @staticmethod
    def _prices(model_cost: dict[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
        return tuple(dict(e) if isinstance(e := model_cost.get(n), dict) else e for n in names)

    @classmethod
    def of(
        cls, reply: Any, own: tuple[int, int] | None, given: float | None, price: Any, bound: int
    ) -> Linear | None:
        """The rates of `reply` (litellm's own reply of `own` prompt and completion tokens, or
        None: counted in details too, which litellm priced `given`) found by `price(prompt,
        completion)`, litellm's price of the reply with that usage; None unless they hold."""
        model, tier = getattr(reply, "model", None), getattr(reply, "service_tier", None)
        if not isinstance(model, str):
            return None
        at = [price(p, c) for p, c in ((0, 0), (1, 0), (0, 1), _PROBE)]
        zero, per_prompt, per_completion, probe = at
        if all(cost is None for cost in at):
            linear = cls(None, model, tier, bound)
        elif zero == 0.0 and isinstance(per_prompt, float) and isinstance(per_completion, float):
            linear = cls((per_prompt, per_completion), model, tier, bound)
        else:
            return None
        if linear.cost(*_PROBE) != probe:
            return None
        if own is not None and sum(own) <= bound and linear.cost(*own) != given:
            return None
        return linear

    def cost(self, prompt: int, completion: int) -> float | None:
        if self.rates is None:
            return None
        return prompt * self.rates[0] + completion * self.rates[1]


def plain_reply(body: Any, headers: Any, linear: Linear, origin: Origin) -> ModelResponse | None:
    """`body` (a reply's JSON) read and priced as litellm's chain would, or None: not plain."""
    if not isinstance(body, dict) or not body.keys() <= _TOP or COST_HEADER in headers:
        return None
    choices, model = body.get("choices"), body.get("model")
    if not (isinstance(choices, list) and len(choices) == 1 and model == linear.model):
        return None
    if body.get("service_tier") != linear.tier or not _envelope(body):
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or not choice.keys() <= _CHOICE or choice.get("logprobs"):
        return None
    counts = _counts(body.get("usage"))
    message = _message(choice.get("message"), origin)
    finish = choice.get("finish_reason")
    if counts is None or message is None or finish not in _FINISH or sum(counts) > linear.bound:
        return None
    finish = "tool_calls" if finish == "stop" and message.tool_calls else finish
    return priced(message, counts, linear, model or origin.model, finish)


def priced(
    message: AssistantMessage, counts: tuple[int, int], linear: Linear, model: str, finish: str
) -> ModelResponse:
    """A plain reply's `ModelResponse`, as `read_reply` makes it, priced at `linear`'s rates."""
    cost = linear.cost(*counts)
    usage = Usage(
        prompt_tokens=counts[0], completion_tokens=counts[1], cached_tokens=0,
        cache_creation_tokens=0, reasoning_tokens=0, cost_usd=cost,
        unpriced=1 if cost is None else 0,
    )  # fmt: skip
    return ModelResponse(message=message, usage=usage, model=model, finish_reason=finish)


def _envelope(body: dict[str, Any]) -> bool:
    """The fields the SDK's strict reading of a chat completion requires, of their types."""
    return (
        body.get("object") == "chat.completion"
        and type(body.get("id")) is str
        and type(body.get("created")) is int
        and type(body.get("system_fingerprint", "")) in (str, type(None))
    )


def _message(message: Any, origin: Origin) -> AssistantMessage | None:
    if not isinstance(message, dict) or not message.keys() <= _MESSAGE:
        return None
    if message.get("role") != "assistant" or any(message.get(k) for k in _NULLABLE):
        return None
    if any(k in message and message[k] is not None for k in ("refusal", "function_call")):
        return None
    content = message.get("content")
    if not (content is None or (type(content) is str and not content.startswith("<"))):
        return None
    raw_calls = message.get("tool_calls")
    calls = [] if raw_calls is None else _calls(raw_calls)
    if calls is None:
        return None
    return AssistantMessage(
        content=content, tool_calls=tuple(calls) or None, reasoning=None,
        reasoning_field=None, thinking_blocks=None, provider_fields=None, origin=origin,
    )  # fmt: skip


def _calls(calls: Any) -> list[ToolCall] | None:
    if not isinstance(calls, list):
        return None
    read = []
    for call in calls:
        if not isinstance(call, dict) or call.keys() != _CALL or call["type"] != "function":
            return None
        function = call["function"]
        if not isinstance(function, dict) or function.keys() != _FUNCTION:
            return None
        name, arguments, call_id = function["name"], function["arguments"], call["id"]
        if not (type(name) is type(arguments) is type(call_id) is str) or not call_id:
            return None
        if name == _PARALLEL:
            return None
        function_call = FunctionCall(name=name, arguments=arguments)
        read.append(ToolCall(id=call_id, function=function_call, provider_fields=None))
    return read


def _counts(usage: Any) -> tuple[int, int] | None:
    """The prompt and completion tokens of a usage of counts only, nothing in its details."""
    if not isinstance(usage, dict) or not usage.keys() <= _USAGE:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is not int or type(completion) is not int or prompt < 0 or completion < 0:
        return None
    total = usage.get("total_tokens", prompt + completion)
    if type(total) is not int:
        return None
    if not all(
        counts_nothing(usage.get(n)) for n in ("prompt_tokens_details", "completion_tokens_details")
    ):
        return None
    return prompt, completion


def counts_nothing(details: Any) -> bool:
    """A usage detail that counts nothing: absent, or every count 0 or null."""
    if details is None:
        return True
    return isinstance(details, dict) and all(v is None or v == 0 for v in details.values())


def smallest_tier(model_cost: dict[str, Any]) -> int:
    """The fewest tokens at which any model in litellm's cost map changes its per-token
    price (`..._above_128k_tokens` keys, `tiered_pricing` ranges)."""
    bounds = [32_000]
    for entry in model_cost.values():
        if not isinstance(entry, dict):
            continue
        bounds += [int(n) * 1000 for key in entry for n in _TIER.findall(key)]
        for tier in entry.get("tiered_pricing") or ():
            span = tier.get("range") if isinstance(tier, dict) else None
            if isinstance(span, list | tuple):
                bounds += [int(b) for b in span if isinstance(b, int | float) and b > 0]
    return min(bounds)
