"""The streamed thin path (`openai_stream.py`) against litellm's own streaming: the same bytes
and headers on the wire, the same deltas reported, the same replies and the same errors, over
real HTTP to a model server on 127.0.0.1 streaming recorded provider replies."""

from __future__ import annotations

from typing import Any

import provider_replies as pr
import pytest
import sse
from model_server import (
    Reply,
    cut_stream,
    delayed,
    error_reply,
    paced,
    raw_reply,
    raw_stream,
    serve,
    text_reply,
    tool_call_reply,
)
from support.listening import Listener
from test_openai_thin_path import READ_FILE, _history
from thin_support import Counting, same_outcome, wire

from loopstate.engine.errors import ModelError
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm import LiteLLMModel

NAME = "openai/test-model"
# Streams of OpenAI-compatible providers, each answered after a first streamed call.
STREAMS = {
    "plain text": text_reply("Done, ünïcode ✓. " * 3),
    "two tool calls": tool_call_reply(
        ("call_1", "read_file", {"path": "a.py"}), ("call_2", "read_file", {"path": "b.py"})
    ),
    "deepseek reasoning + calls": raw_stream(
        pr.deepseek("Look first.", pr.deepseek_call(0, "a.py"), pr.deepseek_call(1, "b.py"))
    ),
    "deepseek reasoning + text": raw_stream(pr.deepseek("Hmm, well.", content="All read.")),
    "groq reasoning": raw_stream(pr.groq("Thinking.", pr.gemini_call("c.py", call_id="x"))),
    "gemini empty and repeated ids": raw_stream(
        pr.gemini_compat(
            pr.gemini_call("a.py", signature="sig=="), pr.gemini_call("b.py"), text="Two."
        )
    ),
}


async def _streams(
    replies: list[Reply], *, direct: bool, tools: bool = True, **settings: Any
) -> tuple[list[Any], list[tuple[ModelResponse | ModelError, list[Any]]], int]:
    """Two streamed calls per reply (the first fills the template): what the server saw,
    what each call returned or raised with the deltas it reported, and how many calls reached
    litellm.acompletion."""
    out: list[tuple[ModelResponse | ModelError, list[Any]]] = []
    script = [r for reply in replies for r in (text_reply("First."), reply)]
    with serve(*script) as server:
        model = LiteLLMModel(NAME, api_base=server.openai_base, api_key="k", direct=direct,
                             stall_s=2.0, **settings)  # fmt: skip
        request = ModelRequest(
            messages=tuple(_history(NAME)), tools=(READ_FILE,) if tools else (), step=3
        )
        with Counting() as count:
            for _ in script:
                listener = Listener()
                try:
                    reply: ModelResponse | ModelError = await model.stream(request, listener)
                except ModelError as exc:
                    reply = exc
                out.append((reply, listener.seen))
    return server.requests, out, count.reached


async def _compare(replies: list[Reply], **settings: Any) -> list[Any]:
    own_requests, own, own_reached = await _streams(replies, direct=False, **settings)
    thin_requests, thin, thin_reached = await _streams(replies, direct=True, **settings)
    assert own_reached == len(own)
    assert thin_reached == 1  # every later call took the thin path
    assert wire(thin_requests) == wire(own_requests)
    assert b'"stream":true' in thin_requests[-1].raw
    for (a, a_seen), (b, b_seen) in zip(own, thin, strict=True):
        if isinstance(a, ModelResponse) and isinstance(b, ModelResponse):
            assert a.model_dump() == b.model_dump()
        same_outcome(a, b)
        assert a_seen == b_seen
    return thin


async def test_recorded_provider_streams_give_the_same_deltas_and_replies_on_the_same_wire() -> (
    None
):
    thin = await _compare(list(STREAMS.values()))
    replies = [r for r, _ in thin]
    assert all(isinstance(r, ModelResponse) for r in replies)
    deepseek = replies[5]
    assert isinstance(deepseek, ModelResponse)
    assert deepseek.message.reasoning == "Look first."
    assert deepseek.usage.reasoning_tokens == 50
    groq = replies[9]
    assert isinstance(groq, ModelResponse)
    assert groq.message.tool_calls is not None
    assert groq.message.tool_calls[0].id == "x"
    # calls streamed with an empty id are kept (litellm's chunk builder alone drops them),
    # with an empty id that the run replaces with a run-unique one
    gemini, gemini_deltas = thin[11]
    assert ("call", 0, None, "read_file", "") in gemini_deltas
    assert isinstance(gemini, ModelResponse)
    assert gemini.message.tool_calls is not None
    assert [(c.id, c.function.name) for c in gemini.message.tool_calls] == [
        ("", "read_file"),
        ("", "read_file"),
    ]
    assert '"a.py"' in gemini.message.tool_calls[0].function.arguments
    signed = {"extra_content": {"google": {"thought_signature": "sig=="}}}
    assert gemini.message.tool_calls[0].provider_fields == signed  # the next request carries it
    assert gemini.message.tool_calls[1].provider_fields is None


async def test_a_request_without_tools_and_with_settings_streams_the_same_bytes() -> None:
    await _compare([text_reply("Plain.")], tools=False, temperature=0.2, max_tokens=50)


@pytest.mark.parametrize("how", ["clean", "drop"])
async def test_a_stream_cut_short_is_the_same_model_error(how: str) -> None:
    cut = cut_stream(paced(text_reply("The capital of France is Paris."), 0.01), 6, how)  # type: ignore[arg-type]
    thin = await _compare([cut])
    error, seen = thin[1]
    assert isinstance(error, ModelError)
    assert seen  # it had begun
    if how == "clean":
        assert error.error_type == "truncated"


async def test_errors_before_the_stream_are_the_same_model_error() -> None:
    thin = await _compare(
        [error_reply(500), raw_reply(pr.openai_rate_limit(), status=429), error_reply(400)]
    )
    assert all(isinstance(r, ModelError) for r, _ in thin[1::2])


async def test_a_stalled_stream_fails_by_its_deadline_on_the_thin_path() -> None:
    _, thin, reached = await _streams(
        [delayed(text_reply("Late."), 3.0), cut_stream(text_reply("Stuck here."), 3, "stall")],
        direct=True,
    )
    assert reached == 1
    for error, _ in thin[1::2]:
        assert isinstance(error, ModelError)
        assert "stalled" in str(error)
        assert error.error_type == "timeout"


@pytest.mark.parametrize("direct", [False, True])
async def test_a_stream_slower_than_the_timeout_setting_is_a_timeout(direct: bool) -> None:
    """The `timeout` setting bounds each read of a stream, before the stall deadline: a
    timeout (retryable) on both paths, as litellm reports it, not a dropped connection."""
    request = ModelRequest(messages=tuple(_history(NAME)))
    with serve(
        text_reply("First."), cut_stream(text_reply("Slow, then silent."), 2, "stall")
    ) as server:
        model = LiteLLMModel(NAME, api_base=server.openai_base, api_key="k", direct=direct,
                             timeout=2.0, stall_s=30.0)  # fmt: skip
        await model.stream(request, Listener())
        listener = Listener()
        with pytest.raises(ModelError) as caught:
            await model.stream(request, listener)
    assert (caught.value.error_type, caught.value.retryable) == ("timeout", True)
    assert "stalled" not in str(caught.value)
    assert listener.seen  # it had begun


async def test_an_error_event_mid_stream_is_the_same_model_error() -> None:
    begun = sse.openai_events_of(pr.gemini_compat(text="Half an answer."))[:3]
    error = b'data: {"error": {"message": "The model is overloaded.", "type": "server_error"}}\n\n'
    thin = await _compare([Reply(events=(*begun, error))])
    failed, seen = thin[1]
    assert isinstance(failed, ModelError)
    assert "overloaded" in str(failed)
    assert seen == [("text", "Half"), ("text", " an")]
