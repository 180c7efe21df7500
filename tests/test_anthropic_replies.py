"""Anthropic replies of every shape on the fast path (`provider_path.py`): over real HTTP to
a model server on 127.0.0.1, each reply below is read and priced exactly as litellm's own path
reads and prices it (text, tool uses, thinking, cache use, citations, server tools, stop
reasons, other keys, models and tiers)."""

from __future__ import annotations

import copy
from typing import Any

import provider_replies as pr
import pytest
from model_server import raw_reply
from test_anthropic_thin_path import _compare

from loopstate.engine.model import ModelResponse

USAGE = {
    "input_tokens": 612, "output_tokens": 48, "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0, "service_tier": "standard",
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
}  # fmt: skip
TEXT = {"type": "text", "text": "Reading ünïcode ✓."}
TOOL_USE = {"type": "tool_use", "id": "toolu_01D", "name": "read_file",
            "input": {"path": "src/ü.py", "lines": [1, 2.5], "deep": {"a": None}}}  # fmt: skip
EMPTY_INPUT = {"type": "tool_use", "id": "toolu_02E", "name": "read_file", "input": {}}
THINKING = pr.anthropic_thinking_tool_use()["content"][0]


def _reply(*content: dict[str, Any], stop: str | None = None, **fields: Any) -> dict[str, Any]:
    """A reply of `content` (else a text) ending with `stop`, with a real usage block."""
    body = pr.anthropic_text("Done.")
    body["usage"] = copy.deepcopy(USAGE)
    if content:
        body["content"] = list(content)
    calls = any(block["type"] == "tool_use" for block in body["content"])
    return {**body, "stop_reason": stop or ("tool_use" if calls else "end_turn"), **fields}


PLAIN = {
    "text": pr.anthropic_text("Done."),
    "text, a real usage block": _reply(),
    "text and a tool use": _reply(TEXT, TOOL_USE),
    "texts and tool uses": _reply(TEXT, TEXT, TOOL_USE, EMPTY_INPUT),
    "a tool use said to end the turn": _reply(TOOL_USE, stop="end_turn"),
    "cut at max tokens, no content": _reply(stop="max_tokens", content=[]),
    "an empty text": _reply({"type": "text", "text": ""}, stop="end_turn"),
}
NOT_PLAIN = {
    "thinking": _reply(THINKING, TOOL_USE),
    "a cache read": _reply(TEXT, usage={**USAGE, "cache_read_input_tokens": 2048}),
    "citations": _reply(
        {
            **TEXT,
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": "R",
                    "document_index": 0,
                    "start_char_index": 0,
                    "end_char_index": 1,
                }
            ],
        },
        stop="end_turn",
    ),
    "a stop sequence": _reply(TEXT, stop="stop_sequence", stop_sequence="###"),
    "a refusal": _reply(TEXT, stop="refusal"),
    "a paused turn": _reply(TEXT, stop="pause_turn"),
    "an empty tool use id": _reply({**TOOL_USE, "id": ""}),
    "a server tool": _reply(
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": "web_search",
            "input": {"query": "a"},
        },
        stop="end_turn",
    ),
    "another key": _reply(TEXT, container=None),
    "another model": _reply(TEXT, model="claude-sonnet-4-5-20991231"),
    "the priority tier": _reply(TEXT, usage={**USAGE, "service_tier": "priority"}),
}


@pytest.mark.parametrize("case", PLAIN)
async def test_a_reply_is_read_and_priced_as_litellm_reads_it(case: str) -> None:
    thin = await _compare([raw_reply(PLAIN[case])])  # both paths alike, wire and replies
    reply = thin[-1]
    assert isinstance(reply, ModelResponse)
    assert reply.usage.cost_usd
    assert reply.response_id == PLAIN[case]["id"]  # the provider's `msg_...`


@pytest.mark.parametrize("case", NOT_PLAIN)
async def test_a_reply_of_any_other_shape_is_read_as_litellm_reads_it(case: str) -> None:
    await _compare([raw_reply(NOT_PLAIN[case])])
