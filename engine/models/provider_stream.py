"""A streamed call on the fast path: the recorded request; its events read straight (JSON
per SSE data line: `provider_plain.PlainStream` for the OpenAI format, `AnthropicStream` for
Anthropic's), their deltas reported as litellm's iterator gives them and the reply built once
at the model's rates. From the first event that has no such reading (an error event, a server
tool, a refusal, ...), litellm's iterator (`litellm_contract.stream_iterator`) reads the
stream again from its start, reporting only the deltas not reported yet; a reply that is not
plain (thinking, cached tokens) is assembled from its chunks and read as `litellm_stream.py`
does litellm's. The first plain stream of a model is also read litellm's way, and its direct
reading kept only if equal. Truncated, dropped or stalled streams are `ModelError`s, as there
(a stall is found between `stall_s` and 5% later: the deadline moves at most that often).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import httpx

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.litellm_contract import response_cost, stream_iterator
from loopstate.engine.models.litellm_errors import model_error
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.litellm_stream import assemble, report, stalled, truncated
from loopstate.engine.models.provider_plain import AnthropicStream, PlainStream
from loopstate.engine.streaming import DeltaListener

if TYPE_CHECKING:
    from loopstate.engine.models.provider_path import ProviderPath

_SLACK = 1.05


class _Lines:
    """A reply's SSE lines, kept as they are read (`kept`); `again` gives them all from the
    first, counting those it gave (`given`)."""

    def __init__(self, response: httpx.Response) -> None:
        self.source = response.aiter_lines()
        self.kept: list[str] = []
        self.given = 0

    async def again(self) -> AsyncIterator[str]:
        self.given = 0
        for line in self.kept:
            self.given += 1
            yield line
        async for line in self.source:
            self.kept.append(line)
            self.given += 1
            yield line

    def reply_id(self) -> str | None:
        """The first event's `id`, or its `message.id` (Anthropic's `message_start`)."""
        data = next((line[5:] for line in self.kept if line.startswith("data:")), "")
        try:
            event = json.loads(data)
        except ValueError:
            return None
        found = event.get("id") or (event.get("message") or {}).get("id")
        return found if isinstance(found, str) else None


async def stream_reply(
    path: ProviderPath, request: httpx.Request, body: dict[str, Any], origin: Origin,
    listener: DeltaListener, stall_s: float,
) -> ModelResponse:  # fmt: skip
    model = origin.model
    try:
        response = await asyncio.wait_for(path.send(request, stream=True), stall_s)
    except TimeoutError:
        raise stalled(model, stall_s, "before the stream began") from None
    lines = _Lines(response)
    plain: PlainStream | None = PlainStream()
    if path.provider == "anthropic":  # litellm reads a response format's tool as text
        plain = None if "response_format" in path.settings else AnthropicStream()
    chunks: list[Any] = []
    try:
        if plain is None or not await _read_plain(lines, plain, listener, model, stall_s):
            reported = max(0, len(lines.kept) - 1)  # all but the line that was not plain
            chunks, finished = await _read(path, lines, listener, model, stall_s, reported)
            plain = None
        else:
            finished = plain.finish is not None
    finally:
        with suppress(Exception):  # closing what already broke may fail again; the cause wins
            await response.aclose()
    if not finished:
        raise truncated(model)
    key = ("stream", body["model"])
    rates = None if plain is None else path.rates(key)
    made = None if plain is None or rates is None else plain.reply(rates, origin, body["model"])
    if made is not None:
        return made
    if plain is not None:
        chunks, _ = await _read(path, lines, listener, model, stall_s, len(lines.kept))
    for chunk in chunks:
        chunk.model = body["model"]  # as litellm's wrapper names each chunk
    raw = assemble(path.litellm, chunks, body["messages"])
    if raw is None:
        raise ModelError(f"model {model} failed: the stream had no chunks", error_type="truncated")
    cost = response_cost(raw)  # as litellm's chunk builder priced it, else as litellm prices
    cost = path.cost(raw) if cost is None else cost
    read = read_reply(raw, origin, cost=cost, response_id=lines.reply_id())
    if plain is not None and key not in path.learned:
        reading = plain
        path.learn(key, raw, read, lambda r: reading.reply(r, origin, body["model"]))
    return read


async def _read_plain(
    lines: _Lines, plain: PlainStream, listener: DeltaListener, model: str, stall_s: float
) -> bool:
    """The stream's lines read straight while its events are plain, their deltas reported;
    whether all were (else the last line kept is the first that was not)."""
    kept, take = lines.kept, plain.take
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout(stall_s)
    try:
        async with deadline:
            async for line in lines.source:
                kept.append(line)
                if not line.startswith("data:") or (data := line[5:].strip()) == "[DONE]":
                    continue
                try:
                    deltas = take(json.loads(data))
                except ValueError:
                    deltas = None
                if deltas is None:
                    return False
                for delta in deltas:
                    if delta[0] == "text":
                        await listener.text(delta[1])
                    else:
                        await listener.tool_call(*delta[1:])
                if (deadline.when() or 0.0) < (now := loop.time()) + stall_s:
                    deadline.reschedule(now + stall_s * _SLACK)
    except (TimeoutError, httpx.TransportError) as exc:
        raise _failed(exc, deadline, model, stall_s, f"after {len(kept)} lines") from exc
    return True


async def _read(
    path: ProviderPath, lines: _Lines, listener: DeltaListener, model: str, stall_s: float,
    reported: int,
) -> tuple[list[Any], bool]:  # fmt: skip
    """The chunks litellm's iterator makes of the stream (from its start), the deltas of the
    lines past the first `reported` reported; and whether one carried the finish reason."""
    chunks: list[Any] = []
    finished = False
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout(stall_s)
    try:
        async with deadline:
            async for chunk in stream_iterator(path.contract(), path.provider, lines.again()):
                if isinstance(chunk, dict):
                    continue  # the iterator's marker of the stream's `[DONE]`, no chunk
                chunks.append(chunk)
                if lines.given > reported:
                    finished = await report(chunk, listener) or finished
                else:
                    choices = getattr(chunk, "choices", None)
                    finished = finished or bool(choices and choices[0].finish_reason)
                deadline.reschedule(loop.time() + stall_s)
    except (asyncio.CancelledError, ModelError):
        raise
    except (TimeoutError, httpx.TransportError) as exc:
        raise _failed(exc, deadline, model, stall_s, f"after {len(chunks)} chunks") from exc
    except Exception as exc:
        if not isinstance(getattr(exc, "status_code", None), int):
            if chunks or reported:  # litellm makes the call again: what was reported is void
                listener.new_attempt()
            raise  # not the provider's: the fast path is turned off (`LiteLLMModel`)
        raise model_error(exc, model) from exc
    return chunks, finished


def _failed(
    exc: Exception, deadline: asyncio.Timeout, model: str, stall_s: float, when: str
) -> ModelError:
    if isinstance(exc, httpx.TransportError):
        message = f"model {model} failed: {type(exc).__name__}: {exc}"
        return ModelError(message, error_type="connection")
    return stalled(model, stall_s, when) if deadline.expired() else model_error(exc, model)
