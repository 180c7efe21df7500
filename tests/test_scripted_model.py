"""`ScriptedModel` fails loudly."""

from __future__ import annotations

import pytest

from loopstate import ModelRequest, ScriptedModel, ScriptExhausted, UnexpectedRequest, UserMessage
from loopstate.engine.models.scripted import call, calls, text


def request(content: str) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content=content),))


async def test_turns_are_played_in_order_and_calls_get_stable_ids() -> None:
    model = ScriptedModel([calls(call("a"), call("b")), "bye"])
    first = await model.complete(request("hi"))
    assert [c.id for c in first.message.calls] == ["call_1_1", "call_1_2"]
    assert (await model.complete(request("again"))).message.content == "bye"


async def test_running_out_of_script_raises_naming_the_turn() -> None:
    model = ScriptedModel(["only"])
    await model.complete(request("1"))
    with pytest.raises(ScriptExhausted, match="has 1 turns and a request for turn 2"):
        await model.complete(request("2"))


async def test_an_unmet_expectation_raises() -> None:
    model = ScriptedModel([text("hi", expect=lambda r: r.messages[-1].content == "hello")])
    with pytest.raises(UnexpectedRequest, match="turn 1 does not meet its expectation"):
        await model.complete(request("goodbye"))


async def test_by_step_picks_the_turn_from_the_request_step() -> None:
    model = ScriptedModel(["one", "two", "three"], by_step=True)
    later = ModelRequest(messages=(UserMessage(content="x"),), step=3)
    assert (await model.complete(later)).message.content == "three"
    with pytest.raises(ScriptExhausted):
        await model.complete(ModelRequest(messages=later.messages, step=4))


async def test_a_reaction_turn_is_computed_from_the_request() -> None:
    model = ScriptedModel([lambda r: f"you said {r.messages[-1].content}"])
    assert (await model.complete(request("hi"))).message.content == "you said hi"
