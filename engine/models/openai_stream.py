"""The thin path of a streamed OpenAI-compatible call: `openai_direct.py`'s request, streamed.

`litellm.acompletion(stream=True)` spends ~0.5 ms of CPU per chunk in its stream wrapper
(`CustomStreamWrapper`: a logging object, a provider transform and a `ModelResponseStream`
per chunk). For the models `openai_direct.eligible` admits, after the first streamed call of
a shape (through litellm, captured as the template of its shape):

- the request: the body built as `ThinCall` builds it (litellm's own message transforms) with
  every other field as litellm handed it to the SDK on the first call (`stream`,
  `stream_options` included), sent as the SDK sent it (`stream=True`): the same bytes;
- the read: the SDK's own SSE reader (`AsyncStream`, `cast_to=object`: each event's JSON as
  a dict, a provider's `error` event raised as the SDK raises it);
- each chunk's deltas reported as `litellm_stream._report` reports litellm's chunks;
- the reply: once the stream has ended, the chunks made into litellm's `ModelResponseStream`
  and assembled by `litellm.stream_chunk_builder`, then read by `read_reply`, as
  `litellm_stream.py` does; a stream without a finish reason is `truncated`, a stall or a drop
  a `ModelError`, as there.

tests/test_openai_thin_stream.py compares both paths over real HTTP: the request bytes, the
deltas, the replies and the errors.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from openai import AsyncStream

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm_errors import model_error
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.litellm_stream import assemble, stalled, truncated
from loopstate.engine.models.openai_client import DirectPayloadClient, Wire, sent
from loopstate.engine.models.openai_direct import _MOVED, Template, ThinCall, shape
from loopstate.engine.models.provider_path import eligible
from loopstate.engine.streaming import DeltaListener

# Templates of streamed calls, by model name, settings and request shape.
_STREAM_TEMPLATES: dict[tuple[str, str, tuple[bool, str]], Template] = {}


def stream_template_of(captured: list[tuple[str, Any]]) -> Template | None:
    """The template of one streamed call, sent once (no retry, no second request)."""
    kinds = [kind for kind, _ in captured]
    if sorted(kinds) != ["params", "reading", "request"]:
        return None
    got = dict(captured)
    params = dict(got["params"])
    if params.get("stream") is not True:
        return None
    timeout = params.pop("timeout", None)
    wire = Wire.of(got["request"], got["reading"])
    if wire is None:
        return None
    fields = tuple((k, None if k in _MOVED else v) for k, v in params.items())
    return Template(fields, timeout, wire)


async def open_stream(client: DirectPayloadClient, wire: Wire, body: dict[str, Any]) -> Any:
    """The SDK's `request(stream=True)` for one attempt: the reply's SSE as dicts."""
    response = await sent(client, wire, body, stream=True)
    options = wire.reading[2]
    return AsyncStream(cast_to=object, response=response, client=client, options=options)


class ThinStream(ThinCall):
    """`ThinCall` for `LiteLLMModel.stream`: its own templates (streamed requests)."""

    def remember_stream(self, request: ModelRequest, captured: list[tuple[str, Any]]) -> None:
        template = stream_template_of(captured)
        if template is not None:
            _STREAM_TEMPLATES[(*self._key, shape(request))] = template

    async def stream(
        self, request: ModelRequest, origin: Origin, listener: DeltaListener, stall_s: float
    ) -> ModelResponse | None:
        """The streamed reply, or None when the call must go through litellm."""
        template = _STREAM_TEMPLATES.get((*self._key, shape(request)))
        if template is None or not eligible(self._litellm, self._settings):
            return None
        data = await self._body(dict(template.fields), request, origin)
        if data is None:
            return None
        body = {k: data[k] if k in _MOVED else v for k, v in template.wire.body}
        model = origin.model
        try:
            stream = await asyncio.wait_for(open_stream(self._client, template.wire, body), stall_s)
        except TimeoutError:
            raise stalled(model, stall_s, "before the stream began") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self._failed(exc, model) from exc
        try:
            chunks, finished = await self._read(stream, listener, data["model"], stall_s)
        finally:
            with suppress(Exception):  # closing what already broke may fail again
                await stream.response.aclose()
        if not finished:
            raise truncated(model)
        return self._reply(chunks, data, origin)

    async def _read(
        self, stream: Any, listener: DeltaListener, wire_model: str, stall_s: float
    ) -> tuple[list[dict[str, Any]], bool]:
        """The chunks and whether one carried the finish reason; a failure as litellm's
        stream wrapper raises it, mapped (`mid_stream`)."""
        model = self._key[0]
        chunks: list[dict[str, Any]] = []
        finished = False
        loop = asyncio.get_running_loop()
        deadline = asyncio.timeout(stall_s)
        try:
            async with deadline:
                async for chunk in stream:
                    chunks.append(chunk)
                    finished = await _report(chunk, listener) or finished
                    deadline.reschedule(loop.time() + stall_s)
        except TimeoutError as exc:
            if not deadline.expired():
                raise model_error(mid_stream(exc, wire_model, chunks), model) from exc
            raise stalled(model, stall_s, f"after {len(chunks)} chunks") from None
        except (asyncio.CancelledError, ModelError):
            raise
        except Exception as exc:
            raise model_error(mid_stream(exc, wire_model, chunks), model) from exc
        return chunks, finished

    def _failed(self, exc: Exception, model: str) -> ModelError:
        return model_error(self._mapped(exc, model), model)

    def _reply(
        self, chunks: list[dict[str, Any]], data: dict[str, Any], origin: Origin
    ) -> ModelResponse:
        """The chunks as litellm's stream wrapper yields them (the requested model's name),
        assembled by `stream_chunk_builder`."""
        litellm = self._litellm
        model = data["model"]
        built = [litellm.ModelResponseStream(**{**chunk, "model": model}) for chunk in chunks]
        raw = assemble(litellm, built, data["messages"])
        if raw is None:
            raise ModelError(
                f"model {origin.model} failed: the stream had no chunks", error_type="truncated"
            )
        return read_reply(raw, origin)


def mid_stream(exc: Exception, wire_model: str, chunks: list[dict[str, Any]]) -> Exception:
    """What litellm's stream wrapper raises for `exc` (`_handle_stream_fallback_error`):
    mapped by `exception_type`, a client error (4xx but 429) as is, anything else wrapped in
    `MidStreamFallbackError` with the text so far."""
    from litellm.exceptions import MidStreamFallbackError
    from litellm.exceptions import OpenAIError as Mapped
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type

    mapped: Exception = exc
    if not isinstance(exc, Mapped):  # litellm's own (an SDK error is mapped too)
        try:
            mapped = exception_type(  # type: ignore[no-untyped-call]
                model=wire_model, custom_llm_provider="openai", original_exception=exc,
                completion_kwargs={}, extra_kwargs={},
            )  # fmt: skip
        except Exception as raised:  # exception_type raises the mapped exception
            mapped = raised
    if any(_client_error(e) for e in (mapped, exc)):
        return mapped
    return MidStreamFallbackError(
        message=str(mapped), model=wire_model, llm_provider="openai", original_exception=mapped,
        generated_content=_text(chunks), is_pre_first_chunk=not chunks,
    )  # fmt: skip


def _client_error(exc: Exception) -> bool:
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    try:
        return code is not None and 400 <= int(code) < 500 and int(code) != 429
    except (TypeError, ValueError):
        return False


def _text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        (c["choices"][0].get("delta") or {}).get("content") or ""
        for c in chunks
        if c.get("choices")
    )


async def _report(chunk: Any, listener: DeltaListener) -> bool:
    """Report one chunk's deltas; whether it carries the finish reason."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not choices:
        return False  # the usage chunk
    choice = choices[0]
    delta = choice.get("delta") or {}
    text = delta.get("content")
    if text:
        await listener.text(text)
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        await listener.tool_call(
            call.get("index") or 0,
            call.get("id") or None,
            function.get("name") or None,
            function.get("arguments") or "",
        )
    return choice.get("finish_reason") is not None
