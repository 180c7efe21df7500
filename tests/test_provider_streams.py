"""Streams on the fast path (`provider_stream.py`) against `litellm.acompletion(stream=True)`
for every fast-path provider but `openai/` (tests/test_openai_thin_stream.py): Anthropic
(thinking with its signature, redacted thinking, text, tool uses; 429 with retry-after, 529,
an error event, a stream cut short), Groq, DeepSeek, xAI, Mistral and OpenRouter. Over real
HTTP to a model server on 127.0.0.1 answering with replies shaped after recorded ones: the
same request bytes, the same deltas in the same order, equal replies and errors."""

from __future__ import annotations

import json
from typing import Any

import provider_replies as pr
import pytest
import sse
from model_server import Reply, cut_stream, raw_reply, raw_stream, serve, text_reply
from support.listening import Listener
from test_provider_path import PROVIDERS as COMPATIBLE
from test_provider_path import _grown
from thin_support import Counting, same_outcome, wire

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Message, ToolMessage, UserMessage
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.litellm import LiteLLMModel

ANTHROPIC = "anthropic/claude-sonnet-4-5"
READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def anthropic_stream(body: dict[str, Any], *, finish: bool = True) -> Reply:
    return Reply(events=tuple(sse.anthropic_events_of(body, finish=finish)))


Outcome = tuple[ModelResponse | ModelError, list[Any]]
LAST: dict[bool, LiteLLMModel] = {}


async def _streams(
    name: str, replies: list[Reply], *, direct: bool
) -> tuple[list[Any], list[Outcome], int]:
    """A run's streamed calls (the history grows by each reply and its tool results): what
    the server saw, each call's reply or error with its deltas, the calls litellm made."""
    out: list[Outcome] = []
    with serve(*replies) as server, Counting() as counting:
        base = server.url if name.startswith("anthropic/") else server.openai_base
        model = LiteLLMModel(name, api_base=base, api_key="k", direct=direct, stall_s=5.0)
        LAST[direct] = model  # its fast path lives while it does
        history: list[Message] = [UserMessage(content="Summarise, ünïcode ✓.")]
        for _ in replies:
            listener = Listener()
            request = ModelRequest(messages=tuple(history), tools=(READ_FILE,))
            try:
                reply = await model.stream(request, listener)
            except ModelError as error:
                out.append((error, listener.seen))
                continue
            out.append((reply, listener.seen))
            history.append(reply.message)
            history += [ToolMessage(tool_call_id=c.id, content="x") for c in reply.message.calls]
    return wire(server.requests), out, counting.reached


async def _compare(name: str, replies: list[Reply]) -> list[Outcome]:
    own_wire, own, own_reached = await _streams(name, replies, direct=False)
    fast_wire, fast, fast_reached = await _streams(name, replies, direct=True)
    assert (own_reached, fast_reached) == (len(replies), 1)  # the first records the shape
    assert fast_wire == own_wire
    for (a, a_seen), (b, b_seen) in zip(own, fast, strict=True):
        same_outcome(a, b)
        assert a_seen == b_seen
    return fast


async def test_anthropic_streams_of_thinking_text_and_tool_uses_are_litellms() -> None:
    replies = [
        anthropic_stream(pr.anthropic_thinking_tool_use()),
        anthropic_stream(pr.anthropic_thinking_tool_use(redacted=True)),
        anthropic_stream(pr.anthropic_thinking_tool_use()),
        anthropic_stream(pr.anthropic_text("All read, ünïcode ✓.")),
    ]
    fast = await _compare(ANTHROPIC, replies)
    thought, deltas = fast[1]
    assert isinstance(thought, ModelResponse)
    assert thought.message.thinking_blocks
    assert len(thought.message.thinking_blocks) == 2
    assert thought.message.calls[0].id == "toolu_01CswdEQBMshySk6Y9DFKrfq"
    assert json.loads(thought.message.calls[0].function.arguments) == {"path": "a.md"}
    assert ("text", "I'll") in deltas
    assert thought.usage.cached_tokens == 2048
    assert thought.response_id == "msg_01Aq9w938a90dw8q"  # litellm's own path: None
    last = fast[-1][0]
    assert isinstance(last, ModelResponse)
    assert last.message.content == "All read, ünïcode ✓."


def _tool_use(call_id: str, given: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "read_file", "input": given}


def anthropic_reply(*content: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    """A reply as Anthropic now streams them: zero cache counts and the tier in its usage."""
    usage = {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
             "output_tokens": 89, "service_tier": "standard"}  # fmt: skip
    return {**pr.anthropic_text(""), "content": list(content), "stop_reason": stop, "usage": usage}


def whole_usage(reply: Reply) -> Reply:
    """`message_delta` carrying the whole usage (input and cache counts too), as the API's
    newer streams do."""
    events = [e.replace(b'"usage": {"output_tokens": 89}', b'"usage": {"input_tokens": 472, '
                        b'"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, '
                        b'"output_tokens": 89}') for e in reply.events]  # fmt: skip
    assert events != list(reply.events)
    return Reply(events=tuple(events))


def bare_tool_use(reply: Reply, *, keep_empty: bool = False) -> Reply:
    """A tool use streamed with no `input_json_delta` (a tool without arguments), or with
    only its first, empty one."""
    empty = b'"partial_json": ""}'
    return Reply(events=tuple(
        e for e in reply.events if b"input_json_delta" not in e or (keep_empty and empty in e)
    ))  # fmt: skip


async def test_plain_anthropic_streams_are_read_directly_as_litellm_reads_them() -> None:
    text = {"type": "text", "text": "Reading both, ünïcode ✓."}
    two = anthropic_reply(
        _tool_use("toolu_01B", {"path": "b.md"}), _tool_use("toolu_01C", {"path": "c.md"})
    )
    no_input = anthropic_stream(anthropic_reply(_tool_use("toolu_01D", {})))
    replies = [
        anthropic_stream(anthropic_reply(text, stop="end_turn")),
        anthropic_stream(anthropic_reply(text, _tool_use("toolu_01A", {"path": "a.md"}))),
        whole_usage(anthropic_stream(two)),
        bare_tool_use(no_input, keep_empty=True),
        bare_tool_use(anthropic_stream(anthropic_reply(_tool_use("toolu_01E", {})))),
        anthropic_stream(anthropic_reply(text, stop="max_tokens")),
        anthropic_stream(anthropic_reply(text, stop="stop_sequence")),
    ]
    fast = await _compare(ANTHROPIC, replies)
    path = LAST[True]._path  # the fast path of the last run's model
    assert path is not None
    assert list(path.learned.values()) == [path.rates(("claude-sonnet-4-5", "stream", frozenset()))]
    assert path.rates(("claude-sonnet-4-5", "stream", frozenset())) is not None  # read directly
    calls = fast[2][0]
    assert isinstance(calls, ModelResponse)
    assert [c.id for c in calls.message.calls] == ["toolu_01B", "toolu_01C"]
    assert calls.usage.cost_usd
    assert calls.usage.prompt_tokens == 472
    empty = fast[3]
    assert isinstance(empty[0], ModelResponse)
    assert empty[0].message.calls[0].function.arguments == "{}"
    assert empty[1][-1] == ("call", 0, None, None, "{}")  # litellm's, for empty input
    bare = fast[4][0]
    assert isinstance(bare, ModelResponse)
    assert bare.message.calls[0].id == "toolu_01E"


ANTHROPIC_ERRORS = {
    "429 retry-after": raw_reply(
        pr.anthropic_error("rate_limit_error", "Number of request tokens has exceeded"),
        status=429, headers=(("retry-after", "7"),),
    ),
    "529 overloaded": raw_reply(pr.anthropic_error("overloaded_error", "Overloaded"), status=529),
    "cut short": anthropic_stream(pr.anthropic_text("Half an answer, then nothing."), finish=False),
    "dropped": cut_stream(text_reply("The capital of France is Paris."), 6, "drop"),
}  # fmt: skip


@pytest.mark.parametrize("failure", ANTHROPIC_ERRORS.values(), ids=ANTHROPIC_ERRORS)
async def test_an_anthropic_stream_that_fails_is_the_same_model_error(failure: Reply) -> None:
    fast = await _compare(ANTHROPIC, [anthropic_stream(pr.anthropic_text("First.")), failure])
    error, _ = fast[1]
    assert isinstance(error, ModelError)


async def test_an_error_event_mid_stream_is_the_same_model_error() -> None:
    begun = sse.anthropic_events_of(pr.anthropic_text("Half an answer."), finish=False)[:4]
    event = pr.anthropic_error("overloaded_error", "Overloaded")
    error = f"event: error\ndata: {json.dumps(event)}\n\n".encode()
    first = anthropic_stream(pr.anthropic_text("First."))
    fast = await _compare(ANTHROPIC, [first, Reply(events=(*begun, error))])
    failed, seen = fast[1]
    assert isinstance(failed, ModelError)
    assert seen  # it had begun


@pytest.mark.parametrize("provider", COMPATIBLE)
async def test_openai_compatible_streams_are_litellms(provider: str) -> None:
    name, reply = COMPATIBLE[provider]
    fast = await _compare(name, [raw_stream(_grown(reply(n), n)) for n in range(4)])
    assert all(isinstance(r, ModelResponse) and r.message.calls for r, _ in fast)
    path = LAST[True]._path  # its later streams were read directly, as litellm reads them
    assert path is not None
    assert path.learned
    assert all(path.learned.values())
    later = fast[-1][0]
    assert isinstance(later, ModelResponse)
    assert later.response_id == reply(3)["id"]
