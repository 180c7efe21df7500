"""One streamed litellm call: deltas reported as chunks arrive, the reply assembled with
litellm's `stream_chunk_builder` and read by the same reader as a non-streamed reply (so usage,
cost, reasoning, thinking blocks and provider fields are the same). Duck-typed: litellm is
passed in, not imported.

A stream is a `ModelError`, never a short answer, when it:
- ends without the provider's finish reason (litellm raises a connection error naming it
  for an OpenAI-format stream; for others it reports `finish_reason="stop"`, its wrapper's
  `received_finish_reason` staying None: both are `truncated`),
- drops mid-way (litellm's error, mapped like any other),
- stalls: no chunk within `stall_s` seconds.
The connection is closed whatever happens (`aclose()`; a cancelled read closes it too).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable
from contextlib import suppress
from typing import Any

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.litellm_errors import causes, model_error
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.streaming import DeltaListener

_NOT_REPORTED = object()


async def stream_reply(
    litellm: Any, arguments: dict[str, Any], origin: Origin, listener: DeltaListener, stall_s: float
) -> ModelResponse:
    model = origin.model
    arguments = {**arguments, "stream": True, "stream_options": {"include_usage": True}}
    try:
        stream = await asyncio.wait_for(litellm.acompletion(**arguments), stall_s)
    except TimeoutError:
        raise stalled(model, stall_s, "before the stream began") from None
    except Exception as exc:
        raise model_error(exc, model) from exc

    def failed(exc: Exception, _: int) -> BaseException:
        return truncated(model) if _ended_early(exc) else model_error(exc, model)

    try:
        chunks, _ = await read_chunks(stream, listener, model, stall_s, failed)
    finally:
        with suppress(Exception):  # closing what already broke may fail again; the cause wins
            await stream.aclose()
    received = getattr(stream, "received_finish_reason", _NOT_REPORTED)
    if received is None:
        raise truncated(model)
    raw = assemble(litellm, chunks, arguments["messages"])
    if raw is None:
        raise ModelError(f"model {model} failed: the stream had no chunks", error_type="truncated")
    return read_reply(raw, origin)


_EARLY_END = "Stream ended before a finish_reason was received"
_CONNECTION = frozenset({"APIConnectionError", "RemoteProtocolError"})


def _ended_early(exc: BaseException) -> bool:
    """Whether `exc` is litellm's own report of a stream that ended cleanly without a finish
    reason: litellm >= 1.108 raises it (an `APIConnectionError` naming it, in a
    `MidStreamFallbackError`) where older ones ended the stream quietly."""
    return any(type(e).__name__ in _CONNECTION and _EARLY_END in str(e) for e in causes(exc))


async def read_chunks(
    stream: AsyncIterable[Any], listener: DeltaListener, model: str, stall_s: float,
    failed: Callable[[Exception, int], BaseException], fresh: Callable[[], bool] = lambda: True,
) -> tuple[list[Any], bool]:  # fmt: skip
    """The chunks of litellm's `stream` (its iterators' `[DONE]` markers, dicts, skipped),
    their deltas reported as they arrive (those `fresh` says are new), and whether one
    carried the finish reason. No chunk for `stall_s` seconds is a stall; any other failure
    is raised as what `failed` makes of it and the number of chunks read (`failed` may give
    the failure itself back: raised as is)."""
    chunks: list[Any] = []
    finished = False
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout(stall_s)  # one timer moved at each chunk, not a task per chunk
    try:
        async with deadline:
            async for chunk in stream:
                if isinstance(chunk, dict):
                    continue
                chunks.append(chunk)
                finished = await report(chunk, listener if fresh() else None) or finished
                deadline.reschedule(loop.time() + stall_s)
    except TimeoutError as exc:
        if not deadline.expired():
            raise model_error(exc, model) from exc
        raise stalled(model, stall_s, f"after {len(chunks)} chunks") from None
    except ModelError:
        raise
    except Exception as exc:
        made = failed(exc, len(chunks))
        if made is exc:
            raise
        raise made from exc
    return chunks, finished


async def report(chunk: Any, listener: DeltaListener | None) -> bool:
    """Report one chunk's deltas (to `listener`, if any); whether it carries the finish reason."""
    choices = getattr(chunk, "choices", None)
    if not choices:
        return False  # the usage chunk
    if listener is None:
        return choices[0].finish_reason is not None
    delta = choices[0].delta
    text = getattr(delta, "content", None)
    if text:
        await listener.text(text)
    for call in getattr(delta, "tool_calls", None) or ():
        function = call.function
        await listener.tool_call(
            call.index or 0,
            call.id or None,
            getattr(function, "name", None) or None,
            getattr(function, "arguments", None) or "",
        )
    return getattr(choices[0], "finish_reason", None) is not None


def truncated(model: str) -> ModelError:
    return ModelError(
        f"model {model} failed: the stream ended without a finish reason (truncated)",
        error_type="truncated",
    )


def stalled(model: str, stall_s: float, when: str) -> ModelError:
    return ModelError(
        f"model {model} failed: the stream stalled, no chunk for {stall_s:g} s {when}",
        error_type="timeout",
    )


_KEY = "\x00loopstate-call:"
"""Stands in for a streamed call's id while litellm assembles the reply."""
_DELTA_KEYS = frozenset({"id", "index", "type", "function", "provider_specific_fields"})


def assemble(litellm: Any, chunks: list[Any], messages: Any) -> Any:
    """The reply `stream_chunk_builder` assembles from `chunks`, with what it would lose of
    the tool calls: a call streamed without an id (Gemini's OpenAI-compatible API sends `""`)
    is dropped by the builder, and a call's extra fields (Gemini's `extra_content` thought
    signature, which the next request must carry) are not kept. Each call's fragments carry a
    stand-in id keyed by its index while the builder runs; then the call gets its own id back
    (empty if none came: the run gives it a run-unique one) and its extra fields."""
    ids: dict[str, str] = {}
    extras: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in getattr(chunk, "choices", None) or ():
            for call in getattr(getattr(choice, "delta", None), "tool_calls", None) or ():
                key = f"{_KEY}{getattr(choice, 'index', 0)}:{getattr(call, 'index', 0) or 0}"
                if getattr(call, "id", None):
                    ids[key] = call.id
                ids.setdefault(key, "")
                dumped = call.model_dump() if hasattr(call, "model_dump") else {}
                more = {k: v for k, v in dumped.items() if k not in _DELTA_KEYS and v is not None}
                extras.setdefault(key, {}).update(more)
                call.id = key
    raw = litellm.stream_chunk_builder(chunks, messages=messages)
    for choice in getattr(raw, "choices", None) or ():
        for call in getattr(getattr(choice, "message", None), "tool_calls", None) or ():
            key = call.id
            if key in ids:
                call.id = ids[key]
                for name, value in extras[key].items():
                    setattr(call, name, value)
    return raw
