"""Frozen data: instances given the same fields share one set of their names, and no copy,
update or evolution of one changes what another reports."""

from __future__ import annotations

import pytest

from loopstate.engine.events import TransitionEvent
from loopstate.engine.messages import AssistantMessage, tool_call
from loopstate.engine.state import RunState, Transition
from loopstate.engine.streaming import TextDelta


def transition(seq: int, **more: str) -> Transition:
    return Transition(seq=seq, source="a", target="b", event="e", at=1.0, **more)


def event(seq: int, **more: str) -> TransitionEvent:
    return TransitionEvent(run_id="r", at=1.0, seq=seq, source="a", target="b", event="e", **more)


def test_events_given_the_same_fields_share_one_set_of_their_names() -> None:
    first, second = event(1), event(2)
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    other = event(3, reason="why")
    assert other.model_fields_set == first.model_fields_set | {"reason"}


def test_messages_made_or_copied_share_one_set_of_their_names() -> None:
    # a run keeps every message and event: a set of names each would be ~30% of a result
    first = AssistantMessage(content="a", tool_calls=(tool_call("c1", "f", "{}"),))
    second = AssistantMessage(content="b", tool_calls=(tool_call("c2", "f", "{}"),))
    copied = first.model_copy(update={"content": "c"})
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    assert copied.__pydantic_fields_set__ is first.__pydantic_fields_set__
    assert first.calls[0].__pydantic_fields_set__ is second.calls[0].__pydantic_fields_set__
    renamed = first.calls[0].model_copy(update={"provider_id": "x"})
    assert renamed.model_fields_set == first.calls[0].model_fields_set | {"provider_id"}
    assert first.calls[0].provider_id is None


def test_trusted_instances_share_one_set_of_their_names() -> None:
    fields = {"source": "a", "target": "b", "event": "e", "at": 1.0, "reason": None}
    first = Transition.trusted(seq=1, actor=None, **fields)
    second = Transition.trusted(seq=2, actor="me", **fields)
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__


def test_models_do_not_share_names_with_one_another() -> None:
    made = TransitionEvent(run_id="r", at=1.0, step=0, seq=1, source="a", target="b", event="e")
    assert made.__pydantic_fields_set__ is not transition(1).__pydantic_fields_set__


def test_an_update_or_an_evolution_changes_only_the_new_instance() -> None:
    first, second = event(1), event(2)
    names = set(first.model_fields_set)
    updated = first.model_copy(update={"reason": "x"})
    evolved = first.evolve(actor="me")
    assert updated.model_fields_set == names | {"reason"}
    assert evolved.model_fields_set == names | {"actor"}
    assert first.model_fields_set == second.model_fields_set == names
    assert first.model_dump(exclude_unset=True) == {
        "run_id": "r", "at": 1.0, "seq": 1, "source": "a", "target": "b", "event": "e",
    }  # fmt: skip


def test_evolving_fields_already_set_keeps_the_shared_names() -> None:
    state = RunState(run_id="r", state="thinking", steps=1)
    evolved = state.evolve(steps=2, state="done")
    assert evolved.__pydantic_fields_set__ is state.__pydantic_fields_set__
    assert RunState.model_validate(evolved.model_dump()) == evolved


@pytest.mark.parametrize("make", ["trusted", "fleeting"])
def test_an_unvalidated_instance_equals_the_validated_one_and_needs_every_field(
    make: str,
) -> None:
    fields = {"run_id": "r", "at": 1.0, "step": 1, "attempt": "a", "kind": "text_delta"}
    made = getattr(TextDelta, make)(**fields, text="hi")
    assert made == TextDelta(**fields, text="hi")
    assert made.model_dump_json() == TextDelta(**fields, text="hi").model_dump_json()
    with pytest.raises(TypeError, match=r"missing \['text'\]"):
        getattr(TextDelta, make)(**fields)


@pytest.mark.parametrize("make", ["trusted", "fleeting"])
def test_an_unvalidated_instance_takes_the_defaults_it_is_not_given_and_refuses_unknown_fields(
    make: str,
) -> None:
    given = {"run_id": "r", "at": 1.0, "seq": 1, "source": "a", "target": "b", "event": "e"}
    trusted = getattr(TransitionEvent, make)(**given)
    assert trusted == TransitionEvent(**given)
    assert (trusted.kind, trusted.step, trusted.reason) == ("transition", 0, None)
    assert trusted.model_fields_set == TransitionEvent(**given).model_fields_set
    assert trusted.model_dump_json() == TransitionEvent(**given).model_dump_json()
    with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
        getattr(TransitionEvent, make)(**given, colour="red")
