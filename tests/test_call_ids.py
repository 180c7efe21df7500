"""Run-unique call ids, the wire form of a history per origin, and data written before
these fields existed."""

from __future__ import annotations

import json

import pytest

from loopstate.engine.callids import MAX_ID_CHARS, assign_ids
from loopstate.engine.messages import (
    AssistantMessage,
    Origin,
    ThinkingBlock,
    ToolMessage,
    tool_call,
)
from loopstate.engine.model import Usage
from loopstate.engine.models.wire import provider_messages
from loopstate.engine.state import RunState

GEMINI = Origin(provider="gemini", model="gemini/gemini-3-pro-preview")
OPENAI = Origin(provider="openai", model="openai/gpt-4o")
SIGNED_ID = "call_" + "Cq4CAdHtim9xS1" * 25  # Gemini 3 packs its signature into the id


def turn(*ids: str, origin: Origin | None = None) -> AssistantMessage:
    calls = tuple(tool_call(i, "read_file", "{}") for i in ids)
    return AssistantMessage(tool_calls=calls, origin=origin)


def test_good_unique_ids_are_kept_as_the_provider_sent_them() -> None:
    message = turn("toolu_01A", "toolu_01B")
    assert assign_ids(message, {"toolu_00"}, 2) is message


def test_empty_and_repeated_ids_get_ids_from_the_runs_call_count() -> None:
    message = turn("", "call_a", "call_a", "old")
    calls = list(message.calls)
    calls[2] = tool_call("call_a", "read_file", '{"path": "other"}')  # another call, same id
    message = assign_ids(message.evolve(tool_calls=tuple(calls)), {"old"}, 7)
    assert [(c.id, c.provider_id, c.id_replaced) for c in message.calls] == [
        ("call_7", "", "empty"),
        ("call_a", None, None),
        ("call_9", "call_a", "repeated"),
        ("call_10", "old", "repeated"),
    ]


def test_a_generated_id_skips_ids_already_taken() -> None:
    message = assign_ids(turn("", "call_3"), {"call_1"}, 1)
    assert [c.id for c in message.calls] == ["call_2", "call_3"]
    message = assign_ids(turn("", ""), {"call_1", "call_2"}, 1)
    assert [c.id for c in message.calls] == ["call_3", "call_4"]


def test_a_call_repeated_in_one_turn_with_the_same_id_and_arguments_is_one_call() -> None:
    message = assign_ids(turn("call_a", "call_b", "call_a", "", ""), set(), 1)
    assert [(c.id, c.id_replaced) for c in message.calls] == [
        ("call_a", None),
        ("call_b", None),
        ("call_4", "empty"),  # empty ids name no call: each is its own
        ("call_5", "empty"),
    ]


@pytest.mark.parametrize("call_id", [".", "..", "...", "a/b", "%2e%2e", "a%2Fb", "x\ty", "id\n"])
def test_an_id_that_is_not_one_safe_url_path_segment_is_replaced(call_id: str) -> None:
    (call,) = assign_ids(turn(call_id), set(), 3).calls
    assert (call.id, call.provider_id, call.id_replaced) == ("call_3", call_id, "unwieldy")


def test_a_typeable_id_up_to_the_bound_is_kept() -> None:
    kept = "toolu_01." + "a" * (MAX_ID_CHARS - 9)
    assert assign_ids(turn(kept), set(), 1).calls[0].id == kept
    assert assign_ids(turn(kept + "a"), set(), 1).calls[0].id == "call_1"


def test_assigning_again_changes_nothing() -> None:
    once = assign_ids(turn("", SIGNED_ID), set(), 1)
    assert assign_ids(once, set(), 1) is once


def test_a_long_provider_id_gets_a_short_one_for_people_and_stays_on_the_wire() -> None:
    message = assign_ids(turn(SIGNED_ID, origin=GEMINI), set(), 5)
    (call,) = message.calls
    assert (call.id, call.provider_id, call.id_replaced) == ("call_5", SIGNED_ID, "unwieldy")
    history = (message, ToolMessage(tool_call_id="call_5", content="ok"))
    own = provider_messages(history, GEMINI)
    assert (own[0]["tool_calls"][0]["id"], own[1]["tool_call_id"]) == (SIGNED_ID, SIGNED_ID)
    other = provider_messages(history, OPENAI)
    assert (other[0]["tool_calls"][0]["id"], other[1]["tool_call_id"]) == ("call_5", "call_5")


def test_provider_data_is_sent_only_to_the_model_that_produced_it() -> None:
    message = AssistantMessage(
        content="x",
        reasoning="r",
        reasoning_field="reasoning_content",
        thinking_blocks=(ThinkingBlock(thinking="t", signature="s"),),
        provider_fields={"extra_content": {"google": {}}},
        origin=OPENAI,
    )
    assert provider_messages((message,), OPENAI) == [
        {
            "role": "assistant",
            "content": "x",
            "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}],
            "reasoning_content": "r",
            "extra_content": {"google": {}},
        }
    ]
    other = Origin(provider="openai", model="openai/gpt-4.1")
    assert provider_messages((message,), other) == [{"role": "assistant", "content": "x"}]


def test_a_message_and_a_run_stored_before_these_fields_still_load() -> None:
    old_message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": "{}"}}
        ],
    }  # fmt: skip
    old_run = {
        "run_id": "r1",
        "state": "done",
        "messages": [{"role": "user", "content": "hi"}, old_message],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "cost_usd": 0.0},
        "error": None,
    }
    state = RunState.model_validate_json(json.dumps(old_run))
    message = state.messages[1]
    assert isinstance(message, AssistantMessage)
    assert (message.origin, message.thinking_blocks, message.calls[0].provider_id) == (
        None,
        None,
        None,
    )
    assert message.model_dump(mode="json", exclude_none=True) == old_message
    assert (state.usage.cached_tokens, state.usage.unpriced, state.failure) == (0, 0, None)


def test_usage_sums_known_costs_and_counts_the_unpriced_calls() -> None:
    priced = Usage(prompt_tokens=10, cost_usd=0.5, cached_tokens=4, reasoning_tokens=2)
    unpriced = Usage(prompt_tokens=5, cost_usd=None, unpriced=1, cache_creation_tokens=3)
    total = priced + unpriced
    assert (total.cost_usd, total.unpriced, total.cost_known) == (0.5, 1, False)
    assert (total.cached_tokens, total.cache_creation_tokens, total.reasoning_tokens) == (4, 3, 2)
    assert (unpriced + unpriced).cost_usd is None
    assert (Usage() + priced).cost_known


def test_an_unknown_cost_survives_a_round_trip_and_unreported_counters_stay_out() -> None:
    unknown = Usage(prompt_tokens=5, cost_usd=None, unpriced=1)
    text = unknown.model_dump_json(exclude_none=True)
    assert Usage.model_validate_json(text) == unknown
    assert Usage(prompt_tokens=1).model_dump() == {
        "prompt_tokens": 1,
        "completion_tokens": 0,
        "cost_usd": 0.0,
    }
