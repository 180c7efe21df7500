"""What the fast path's direct readers save: a reply read straight from its JSON or SSE events
and priced at the model's per-token rates, against litellm's own reading of the same bytes.

    python bench/reply_reading.py [REPEATS]

For every fast-path provider shape (replies as `bench/wire_server.py` and `tests/sse.py` shape
them, after recorded ones), CPU µs per reply of:

- direct: `provider_plain.plain_reply` of a plain reply's JSON (`provider_stream.PlainStream` /
  `AnthropicStream` over a streamed reply's events), at the rates `ProviderPath.learn` finds;
- litellm: what the fast path would do without them, as litellm itself does: the config's
  `transform_response` (litellm's stream iterator and `stream_chunk_builder` for a stream),
  `litellm.completion_cost`, then `read_reply`.

Both readings are checked equal (the same `ModelResponse`, cost included) before timing. The
ratio litellm / direct is the median over REPEATS (default 5) of back-to-back samples. These
readers are ~650 of `engine/models/`'s lines: this is what they buy on every call.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import sse  # noqa: E402
import wire_server  # noqa: E402

from loopstate.engine.messages import Origin  # noqa: E402
from loopstate.engine.models.litellm import _import_litellm  # noqa: E402
from loopstate.engine.models.litellm_contract import stream_iterator  # noqa: E402
from loopstate.engine.models.litellm_reply import read_reply  # noqa: E402
from loopstate.engine.models.litellm_stream import assemble  # noqa: E402
from loopstate.engine.models.provider_path import _NO_LOGGING  # noqa: E402
from loopstate.engine.models.provider_plain import find_rates, plain_reply  # noqa: E402
from loopstate.engine.models.provider_stream import AnthropicStream, PlainStream  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
CALLS = 300
SHAPES = {  # name: provider, model, wire_server shape (None: Anthropic's format)
    "openai/": ("openai", "gpt-4o-mini", b""),
    "groq/": ("groq", "openai/gpt-oss-20b", b"groq"),
    "deepseek/ reasoning": ("deepseek", "deepseek-reasoner", b"deepseek"),
    "gemini-compatible": ("openai", "gemini-2.5-flash", b"gemini"),
    "anthropic/": ("anthropic", "claude-sonnet-4-5-20250929", None),
}
litellm = _import_litellm()


def _price(provider: str, model: str) -> Callable[[Any], float | None]:
    def price(raw: Any) -> float | None:
        try:
            cost = litellm.completion_cost(
                completion_response=raw, model=f"{provider}/{model}", custom_llm_provider=provider
            )
        except Exception:
            return None
        return float(cost)

    return price


def plain_pair(provider: str, model: str, shape: bytes | None) -> tuple[Any, Any]:
    """The direct and litellm readings of one plain reply with a tool call."""
    anthropic = shape is None
    content = wire_server._anthropic_reply(True) if anthropic else wire_server._reply(True, shape)
    url = "http://x/v1/messages" if anthropic else "http://x/v1/chat/completions"
    response = httpx.Response(200, content=content, request=httpx.Request("POST", url))
    config = litellm.ProviderConfigManager.get_provider_chat_config(
        model=model, provider=litellm.LlmProviders(provider)
    )
    origin, price = Origin(provider=provider, model=f"{provider}/{model}"), _price(provider, model)
    body = {"model": model, "messages": [{"role": "user", "content": "go"}], "max_tokens": 64}

    def through_litellm() -> Any:
        raw = config.transform_response(
            model=model, raw_response=response, model_response=litellm.ModelResponse(),
            logging_obj=_NO_LOGGING, request_data=body, messages=body["messages"],
            optional_params={"max_tokens": 64}, litellm_params={}, encoding=None,
            api_key="k", json_mode=False,
        )  # fmt: skip
        reply_id = json.loads(response.content)["id"]  # as `ProviderPath._read` names it
        return raw, read_reply(raw, origin, cost=price(raw), response_id=reply_id)

    raw, _ = through_litellm()
    names = (origin.model, model, str(raw.model), f"{provider}/{raw.model}")
    rates = find_rates(litellm, raw, tuple(dict.fromkeys(names)), price)
    assert rates is not None, provider

    def direct() -> Any:
        reply = json.loads(response.content)
        return plain_reply(reply, rates, origin, anthropic, reply["id"])

    return direct, lambda: through_litellm()[1]


async def stream_pair(provider: str, model: str) -> tuple[Any, Any]:
    """The direct and litellm readings of one streamed text reply of ~40 events."""
    text = " ".join(f"word{i}" for i in range(36))
    anthropic = provider == "anthropic"
    if anthropic:
        events = sse.anthropic_events(text, [], (11, 37), model)
    else:
        events = sse.openai_events(text, [], (11, 37), model, include_usage=True)
    lines = [line for event in events for line in event.decode().split("\n") if line]
    config = litellm.ProviderConfigManager.get_provider_chat_config(
        model=model, provider=litellm.LlmProviders(provider)
    )
    origin, price = Origin(provider=provider, model=f"{provider}/{model}"), _price(provider, model)
    messages = [{"role": "user", "content": "go"}]
    first = json.loads(next(line[5:] for line in lines if line.startswith("data:")))
    reply_id = first.get("id") or first["message"]["id"]  # as `provider_stream` names it

    async def source() -> Any:
        for line in lines:
            yield line

    async def through_litellm() -> Any:
        chunks = [c async for c in stream_iterator(config, provider, source())]
        chunks = [c for c in chunks if not isinstance(c, str | dict)]  # as `read_chunks` skips
        for chunk in chunks:
            chunk.model = model  # as litellm's wrapper names each chunk
        raw = assemble(litellm, chunks, messages)
        return raw, read_reply(raw, origin, cost=price(raw), response_id=reply_id)

    async def read_direct(rates: Any) -> Any:
        reading = AnthropicStream() if anthropic else PlainStream()
        for line in lines:
            if line.startswith("data:") and (data := line[5:].strip()) != "[DONE]":
                assert reading.take(json.loads(data)) is not None, data
        return reading.reply(rates, origin, model)

    raw, _ = await through_litellm()
    names = (origin.model, model, str(raw.model), f"{provider}/{raw.model}")
    rates = find_rates(litellm, raw, tuple(dict.fromkeys(names)), price)
    assert rates is not None, provider

    async def litellm_reading() -> Any:
        return (await through_litellm())[1]

    return lambda: read_direct(rates), litellm_reading


async def _read(read: Callable[[], Any]) -> Any:
    made = read()
    return await made if asyncio.iscoroutine(made) else made


async def _sample(read: Callable[[], Any]) -> float:
    start = time.process_time()
    for _ in range(CALLS):
        await _read(read)
    return (time.process_time() - start) / CALLS * 1e6


async def measure(name: str, direct: Callable[[], Any], through_litellm: Callable[[], Any]) -> None:
    made, expected = await _read(direct), await _read(through_litellm)
    assert made == expected, f"{name}: the readings differ\n{made}\n{expected}"
    pairs = [(await _sample(direct), await _sample(through_litellm)) for _ in range(REPEATS)]
    fast, slow = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    ratio = statistics.median(s / f for f, s in pairs)
    print(f"  {name:32} {fast:8.0f} {slow:9.0f}   {ratio:5.1f}x   {slow - fast:7.0f}")


async def main() -> None:
    print("CPU µs per reply         direct   litellm   litellm/direct   saved per call")
    for name, (provider, model, shape) in SHAPES.items():
        await measure(f"{name} plain", *plain_pair(provider, model, shape))
    for name, (provider, model) in {
        "openai/": ("openai", "gpt-4o-mini"),
        "anthropic/": ("anthropic", "claude-sonnet-4-5-20250929"),
    }.items():
        await measure(f"{name} stream (40 events)", *await stream_pair(provider, model))


if __name__ == "__main__":
    asyncio.run(main())
