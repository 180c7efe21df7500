"""A streamed call on the fast path: the recorded request; its events read straight (JSON
per SSE data line: `PlainStream` for the OpenAI format, `AnthropicStream` for Anthropic's),
their deltas reported as litellm's iterator gives them, the reply built once at the model's
rates. From the first event with no such reading (an error event, a server tool, a refusal),
litellm's iterator (`litellm_contract.stream_iterator`) reads the stream again from its start,
reporting only the deltas not reported yet; a reply that is not plain is assembled from its
chunks and read as `litellm_stream.py` does. The first plain stream of a form is also read
litellm's way, its direct reading kept only if equal. Truncated, dropped or stalled streams are
`ModelError`s (a stall is found between `stall_s` and 5% later)."""

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
from loopstate.engine.models.litellm_stream import assemble, read_chunks, stalled, truncated
from loopstate.engine.models.provider_plain import (
    ANTHROPIC_FINISH,
    REASONING,
    Rates,
    assistant,
    priced_usage,
    read_call,
    read_counts,
)
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
    key = (body["model"], "stream", plain and frozenset(plain.seen))  # its form, as `form`
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
        path.learn(
            key, raw, read, lambda r: reading.reply(r, origin, body["model"]),
            lambda r: _built_price(path, r),
        )  # fmt: skip
    return read


def _built_price(path: ProviderPath, raw: Any) -> float | None:
    """The chunk builder's price: `completion_cost`, else `cost_per_token` of `raw.model`."""
    litellm = path.litellm
    with suppress(Exception):
        return float(
            litellm.completion_cost(completion_response=raw, custom_llm_provider=path.provider)
        )
    with suppress(Exception):
        return float(sum(litellm.cost_per_token(model=raw.model, usage_object=raw.usage)))
    return None


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

    def failed(exc: Exception, read: int) -> BaseException:
        status = getattr(exc, "status_code", None)
        if isinstance(exc, httpx.TransportError) or isinstance(status, int):
            return model_error(exc, model)  # the provider's or the network's
        if read or reported:  # litellm makes the call again: what was reported is void
            listener.new_attempt()
        return exc  # not the provider's: the fast path is turned off (`LiteLLMModel`)

    try:
        chunks = stream_iterator(path.contract(), path.provider, lines.again())
    except Exception as exc:
        raise failed(exc, 0)  # noqa: B904 (`exc` itself, the attempt made void)
    return await read_chunks(
        chunks, listener, model, stall_s, failed, lambda: lines.given > reported
    )


def _failed(
    exc: Exception, deadline: asyncio.Timeout, model: str, stall_s: float, when: str
) -> ModelError:
    """A stall, or the connection's failure (`httpx`'s: a timeout, a dropped connection)."""
    return stalled(model, stall_s, when) if deadline.expired() else model_error(exc, model)


_EVENT = frozenset(
    {"id", "object", "created", "model", "system_fingerprint", "choices", "usage",
     "service_tier", "x_groq", "usage_breakdown"}
)  # fmt: skip
_STREAM_CHOICE = frozenset({"index", "delta", "logprobs", "finish_reason"})
_DELTA = frozenset({"role", "content", "tool_calls", "refusal", *REASONING})
_STREAM_CALL = frozenset({"index", "id", "type", "function"})


class PlainStream:
    """A plain OpenAI-format stream read event by event (`take`: the deltas to report, or
    None: the event is not plain) and made into its reply once (`reply`)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index: [id, name, argument fragments]
        self.finish: str | None = None
        self.usage: Any = None
        self.reply_id: Any = None
        self.seen: set[str] = set()  # the fields its deltas and calls had
        self.reasoning: dict[str, list[str]] = {}
        self.plain = True  # Anthropic's thinking makes it litellm's to assemble

    def take(self, event: Any) -> list[tuple[Any, ...]] | None:
        if not isinstance(event, dict) or not event.keys() <= _EVENT:
            return None
        if "usage" in (event.get("x_groq") or {}):  # litellm's Groq iterator reads it there
            return None
        self.reply_id = event.get("id") if self.reply_id is None else self.reply_id
        choices = event.get("choices")
        if event.get("usage") is not None:
            self.usage = event["usage"]
        if not choices:
            return [] if isinstance(choices, list) else None
        choice = choices[0]
        if len(choices) != 1 or not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return None
        if not choice.keys() <= _STREAM_CHOICE or choice.get("logprobs") is not None:
            return None
        self.finish = choice.get("finish_reason") or self.finish
        return self._openai_delta(choice.get("delta"))

    def _openai_delta(self, delta: Any) -> list[tuple[Any, ...]] | None:
        if not isinstance(delta, dict) or not delta.keys() <= _DELTA or delta.get("refusal"):
            return None
        deltas = self._calls(delta.get("tool_calls") or ())
        text = delta.get("content")
        said = [(k, delta[k]) for k in REASONING if delta.get(k) is not None]
        if deltas is None or not (text is None or type(text) is str):
            return None
        if any(type(part) is not str for _, part in said):
            return None
        self.seen.update(k for k, v in delta.items() if v is not None)
        for name, part in said:  # no delta of its own, as litellm's iterator gives none
            self.reasoning.setdefault(name, []).append(part)
        if text is not None:  # "" too: litellm's builder then joins the texts
            self.texts.append(text)
        if text:
            deltas.insert(0, ("text", text))
        return deltas

    def _calls(self, calls: Any) -> list[tuple[Any, ...]] | None:
        deltas: list[tuple[Any, ...]] = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not call.keys() <= _STREAM_CALL:
                return None
            index, name, part = (
                call.get("index") or 0,
                function.get("name"),
                function.get("arguments"),
            )
            if not function.keys() <= {"name", "arguments"} or type(index) is not int:
                return None
            if not all(v is None or type(v) is str for v in (call.get("id"), name, part)):
                return None
            self.seen.update(f".{k}" for k in call)
            made = self.calls.setdefault(index, [None, None, []])
            made[0], made[1] = made[0] or call.get("id"), made[1] or name
            made[2].append(part or "")
            deltas.append(("call", index, call.get("id") or None, name or None, part or ""))
        return deltas

    def reply(self, rates: Rates, origin: Origin, model: str) -> ModelResponse | None:
        """The reply, priced at `rates`, or None: its usage is not plain (or missing)."""
        counts = read_counts(self.usage)
        if counts is None or counts[0] + counts[2] > rates.bound or self.finish is None:
            return None
        thought = [("reasoning_content", "".join(ps)) for ps in self.reasoning.values()]
        if len(thought) > 1 or not self.plain:  # litellm's builder joins either field there
            return None
        calls = []
        for _, (call_id, name, parts) in sorted(self.calls.items()):
            made = read_call(call_id, name, "".join(parts))
            if made is None:
                return None
            calls.append(made)
        usage = priced_usage(counts, rates)
        finish = "tool_calls" if self.finish == "stop" and calls else self.finish
        content = "".join(self.texts) if self.texts else None
        content = content or None if not calls else content
        return ModelResponse.trusted(
            message=assistant(content, calls, origin, *thought), usage=usage,
            model=model, finish_reason=finish, response_id=self.reply_id,
        )  # fmt: skip


class AnthropicStream(PlainStream):
    """A plain Anthropic stream read event by event, with the deltas litellm's iterator gives
    its events (`take`: None for an event it has no reading of: an error, a server tool, a
    citation). Thinking is read (no deltas) but makes the reply litellm's to assemble."""

    def __init__(self) -> None:
        super().__init__()
        self._block: tuple[str, list[str] | None] = ("", None)  # its type, a tool's parts

    def take(self, event: Any) -> list[tuple[Any, ...]] | None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self.reply_id = event["message"].get("id")
            self.texts.append("")  # every chunk of litellm's carries a text, if empty
            return self._usage(event["message"].get("usage"))
        if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            return self._start(event["content_block"])
        if kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            return self._delta(event["delta"])
        if kind == "content_block_stop":
            (block, parts), self._block = self._block, ("", None)
            if block == "tool_use" and parts is not None and not "".join(parts):
                self.plain = self.plain and bool(parts)  # no delta at all: litellm's reading
                parts.append("{}")
                return [("call", len(self.calls) - 1, None, None, "{}")] if len(parts) > 1 else []
            return []
        if kind == "message_delta" and isinstance(event.get("delta"), dict):
            finish = ANTHROPIC_FINISH.get(str(event["delta"].get("stop_reason")))
            self.plain = self.plain and finish is not None
            self.finish = finish or "other"
            return self._usage(event.get("usage", {}))
        return [] if kind in ("ping", "message_stop") else None

    def _usage(self, usage: Any) -> list[tuple[Any, ...]] | None:
        if not isinstance(usage, dict):
            return None
        self.usage = {**(self.usage or {}), **usage}
        return []

    def _start(self, block: dict[str, Any]) -> list[tuple[Any, ...]] | None:
        kind, text = block.get("type"), block.get("text")
        if kind == "text" and type(text) is str:
            self._block = ("text", None)
            self.texts.append(text)
            return [("text", text)] if text else []
        if kind == "tool_use" and type(block.get("id")) is type(block.get("name")) is str:
            self._block = ("tool_use", [])
            index = len(self.calls)
            self.calls[index] = [block["id"], block["name"], self._block[1]]
            return [("call", index, block["id"] or None, block["name"] or None, "")]
        if kind in ("thinking", "redacted_thinking"):
            self._block, self.plain = ("thinking", None), False
            return []
        return None

    def _delta(self, delta: dict[str, Any]) -> list[tuple[Any, ...]] | None:
        kind, (block, parts) = delta.get("type"), self._block
        text = delta.get("text", delta.get("partial_json"))
        if kind == "text_delta" and block == "text" and type(text) is str:
            self.texts.append(text)
            return [("text", text)] if text else []
        if kind == "input_json_delta" and parts is not None and type(text) is str:
            parts.append(text)
            return [("call", len(self.calls) - 1, None, None, text)]
        return [] if kind in ("thinking_delta", "signature_delta") and block == "thinking" else None
