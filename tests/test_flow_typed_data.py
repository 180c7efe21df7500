"""Typed flow data: fields checked when the flow is defined, updates that do not fit refused to
the model, gates that fail closed on an absent field with the reason kept."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from statemachine import State

from loopstate import (
    DefinitionError,
    Flow,
    FlowMachine,
    MemoryStore,
    Output,
    Phase,
    reads,
    tool,
)
from loopstate.engine.outside import OutsideError
from loopstate.testing import ScriptedModel, call, text


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    age: int | None = None


class Greeting(BaseModel):
    text: str


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: Profile = Profile()
    greeting: Greeting | None = None


class Signup(FlowMachine):
    ask = State(initial=True)
    greet = State()
    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = ask.to(greet, cond="adult") | greet.to(done, cond="greeted")
    user_replied = ask.to(ask)
    fail = failed.from_(ask, greet)
    abort = aborted.from_(ask, greet)

    @reads("profile.age")
    def adult(self, data: Data) -> bool:
        assert data.profile.age is not None  # @reads keeps the gate closed while it is absent
        return data.profile.age >= 18

    @reads("greeting")
    def greeted(self, data: Data) -> bool:
        return True


@tool
def record(field: str, value: str | int) -> str:
    """Record one answer about the user."""
    return f"recorded {field}"


def _record(data: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return {**data, "profile": {**data.get("profile", {}), args["field"]: args["value"]}}


def phases() -> dict[str, Phase]:
    return {
        "ask": Phase(
            instructions="Ask the user's name and age.",
            tools=[record],
            updates={"record": _record},
            waits_for_user=True,
        ),
        "greet": Phase(instructions="Greet {profile}.", output=Output(Greeting, key="greeting")),
    }


def signup(script: list[Any], machine: type[FlowMachine] = Signup) -> Flow:
    return Flow(machine, phases(), data=Data, model=ScriptedModel(script), store=MemoryStore())


async def test_an_unknown_field_goes_back_to_the_model_and_an_absent_one_keeps_the_gate_shut() -> (
    None
):
    flow = signup(
        [
            call("record", {"field": "nme", "value": "Ada"}),  # a field Profile lacks
            call("record", {"field": "name", "value": "Ada"}),  # corrected
            text("And how old are you?"),
            call("record", {"field": "age", "value": "36"}),
            text("Thanks."),
            call("submit_greet", {"text": "Welcome, Ada!"}),
        ]
    )
    first = await flow.run("Hi, sign me up")
    stored = await flow.store.load(first.run_id)
    refused = next(c for c in stored.calls if c.arguments.get("field") == "nme")
    assert refused.status == "failed"
    told = next(m.content for m in stored.messages if m.role == "tool")  # what the model saw
    assert "does not fit the flow's Data: profile.nme: Extra inputs are not permitted" in str(told)
    assert (first.status, first.phase) == ("awaiting_input", "ask")
    assert first.data == {"profile": {"name": "Ada"}}  # nothing of the refused call
    assert stored.flow is not None
    assert stored.flow.held == "gate adult reads profile.age: absent"
    assert first.held == stored.flow.held
    final = await flow.resume(first.run_id, message="36")
    assert (final.status, final.phase) == ("done", "done")
    assert final.data["profile"] == {"name": "Ada", "age": 36}  # validated: "36" became 36
    assert final.data["greeting"] == {"text": "Welcome, Ada!"}
    assert (await flow.store.load(first.run_id)).flow.held is None  # type: ignore[union-attr]


async def test_a_phase_that_cannot_wait_fails_closed_saying_which_field_was_absent() -> None:
    class Quick(FlowMachine):  # ask never waits for the user
        ask = State(initial=True)
        greet = State()
        done, failed, aborted = State(final=True), State(final=True), State(final=True)
        advance = ask.to(greet, cond="adult") | greet.to(done)
        fail = failed.from_(ask, greet)
        abort = aborted.from_(ask, greet)
        adult = Signup.adult

    flow = Flow(
        Quick,
        {**phases(), "ask": Phase(tools=[record], updates={"record": _record})},
        data=Data,
        model=ScriptedModel([call("record", {"field": "name", "value": "Ada"}), "Hello"]),
        store=MemoryStore(),
    )
    result = await flow.run("Hi")
    assert (result.status, result.phase) == ("failed", "failed")
    assert result.error is not None
    assert result.error.endswith("none of its gates opened: gate adult reads profile.age: absent")


def test_a_gate_over_a_field_the_data_lacks_is_refused_when_the_flow_is_defined() -> None:
    class Typo(Signup):
        @reads("profile.agee")
        def adult(self, data: Data) -> bool:
            return True

    with pytest.raises(DefinitionError) as refused:
        signup([], Typo)
    assert str(refused.value) == (
        "Typo: gate 'adult' (leaving phase 'ask') reads 'profile.agee': "
        "Data.profile has no field 'agee' (its fields: name, age)"
    )


def test_a_typed_flows_gate_must_name_what_it_reads() -> None:
    class Silent(Signup):
        def adult(self, data: Data) -> bool:
            return True

    with pytest.raises(DefinitionError, match=r"gate 'adult' .* decorate it with @reads"):
        signup([], Silent)


def test_an_output_must_land_in_a_field_of_its_type() -> None:
    class Other(BaseModel):
        text: str

    with pytest.raises(DefinitionError, match=r"puts a Other in 'greeting'.* as a Greeting"):
        Flow(
            Signup,
            {**phases(), "greet": Phase(output=Output(Other, key="greeting"))},
            data=Data,
            model=ScriptedModel([]),
            store=MemoryStore(),
        )


def test_an_output_must_land_in_a_field_of_the_data() -> None:
    with pytest.raises(DefinitionError, match="phase 'greet' puts its output in 'welcome'"):
        Flow(
            Signup,
            {**phases(), "greet": Phase(output=Output(Greeting, key="welcome"))},
            data=Data,
            model=ScriptedModel([]),
            store=MemoryStore(),
        )


async def test_starting_data_that_does_not_fit_is_refused_before_a_run_exists() -> None:
    flow = signup([])
    with pytest.raises(OutsideError, match=r"data: does not fit Data: profile\.age: Input should"):
        await flow.run("Hi", data={"profile": {"age": "old"}})
    assert await flow.store.list_runs() == []


async def test_without_a_data_model_reads_still_keeps_a_gate_closed_on_an_absent_key() -> None:
    class Plain(FlowMachine):
        ask = State(initial=True)
        done, failed, aborted = State(final=True), State(final=True), State(final=True)
        advance = ask.to(done, cond="has_topic")
        user_replied = ask.to(ask)
        fail = failed.from_(ask)
        abort = aborted.from_(ask)

        @reads("topic")
        def has_topic(self, data: dict[str, Any]) -> bool:
            return bool(data["topic"])

    flow = Flow(
        Plain,
        {"ask": Phase(waits_for_user=True)},
        model=ScriptedModel(["What do you need?"]),
        store=MemoryStore(),
    )
    result = await flow.run("Hi")
    assert result.status == "awaiting_input"
    assert (await flow.store.load(result.run_id)).flow.held == (  # type: ignore[union-attr]
        "gate has_topic reads topic: absent"
    )


async def test_a_data_model_that_ignores_extra_keys_still_has_them_refused() -> None:
    class Loose(BaseModel):  # pydantic's default: extra keys ignored, silently
        profile: dict[str, Any] = {}
        greeting: Greeting | None = None

    flow = Flow(Signup, phases(), data=Loose, model=ScriptedModel([]), store=MemoryStore())
    with pytest.raises(OutsideError, match="nickname: not a field of Loose"):
        await flow.run("Hi", data={"nickname": "Ada"})


async def test_code_that_writes_a_field_the_data_lacks_fails_the_run_saying_so() -> None:
    class Coded(FlowMachine):
        step = State(initial=True)
        done, failed, aborted = State(final=True), State(final=True), State(final=True)
        advance = step.to(done, cond="named")
        fail = failed.from_(step)
        abort = aborted.from_(step)

        @reads("profile.name")
        def named(self, data: Data) -> bool:
            return True

    flow = Flow(
        Coded,
        {"step": Phase(action=lambda data: {**data, "oops": 1})},
        data=Data,
        store=MemoryStore(),
    )
    result = await flow.run("go")
    assert (result.status, result.phase) == ("failed", "failed")
    assert result.error == (
        "phase 'step': the data does not fit Data: oops: Extra inputs are not permitted"
    )


async def test_an_output_with_a_key_its_model_does_not_know_goes_back_to_the_model() -> None:
    flow = signup(
        [
            call("record", {"field": "age", "value": 40}),
            "Thanks.",
            call("submit_greet", {"text": "Hi!", "mood": "cheerful"}),  # Greeting has no mood
            call("submit_greet", {"text": "Welcome!"}),
        ]
    )
    result = await flow.run("Hi")
    assert (result.status, result.data["greeting"]) == ("done", {"text": "Welcome!"})
    told = [m.content for m in result.messages if m.role == "tool"]
    assert "mood" in told[1]
    assert "Extra inputs are not permitted" in told[1]
