"""`TokenBudget`: the newest history that fits a token budget, never without its system
message, never a tool call without its result."""

from __future__ import annotations

import pytest

from loopstate import (
    Agent,
    AssistantMessage,
    DefinitionError,
    MemoryStore,
    ScriptedModel,
    SystemMessage,
    TokenBudget,
    ToolMessage,
    UserMessage,
    tool,
)
from loopstate.engine.messages import Message, tool_call
from loopstate.engine.models.scripted import call


def words(message: Message) -> int:
    """A counter that charges one token per word of content and per call."""
    text = getattr(message, "content", None) or ""
    calls = len(getattr(message, "tool_calls", None) or ())
    return len(text.split()) + calls


SYSTEM = SystemMessage(content="be brief")  # 2
OLD_Q = UserMessage(content="one two three")  # 3
OLD_CALL = AssistantMessage(tool_calls=(tool_call("c1", "lookup", "{}"),))  # 1
OLD_RESULT = ToolMessage(tool_call_id="c1", content="four five")  # 2
OLD_A = AssistantMessage(content="six")  # 1
NEW_Q = UserMessage(content="seven eight")  # 2
NEW_CALL = AssistantMessage(tool_calls=(tool_call("c2", "lookup", "{}"),))  # 1
NEW_RESULT = ToolMessage(tool_call_id="c2", content="nine ten eleven")  # 3
HISTORY = (SYSTEM, OLD_Q, OLD_CALL, OLD_RESULT, OLD_A, NEW_Q, NEW_CALL, NEW_RESULT)


@pytest.mark.parametrize(
    ("budget", "shown"),
    [
        (100, HISTORY),
        (15, HISTORY),
        (14, (SYSTEM, NEW_Q, NEW_CALL, NEW_RESULT)),  # the old turn goes whole
        (3, (SYSTEM, NEW_Q, NEW_CALL, NEW_RESULT)),  # the latest unit stays, even over
    ],
)
def test_the_oldest_whole_turns_go_first(budget: int, shown: tuple[Message, ...]) -> None:
    assert TokenBudget(budget, counter=words)(HISTORY) == shown


def test_a_long_turn_loses_its_oldest_calls_with_their_results_never_one_without_the_other() -> (
    None
):
    calls = [
        (
            AssistantMessage(tool_calls=(tool_call(f"c{i}", "lookup", "{}"),)),
            ToolMessage(tool_call_id=f"c{i}", content="a b c"),
        )
        for i in range(4)
    ]
    history = (SYSTEM, NEW_Q, *(m for pair in calls for m in pair))
    shown = TokenBudget(2 + 2 + 4 * 2, counter=words)(history)
    assert shown == (SYSTEM, NEW_Q, *calls[2], *calls[3])
    ids = {m.tool_call_id for m in shown if isinstance(m, ToolMessage)}
    asked = {c.id for m in shown if isinstance(m, AssistantMessage) for c in m.calls}
    assert ids == asked


def test_litellms_counter_is_the_default_and_counts_more_for_longer_text() -> None:
    budget = TokenBudget(1000, model="gpt-4o")
    short, long = UserMessage(content="hi"), UserMessage(content="hello there " * 50)
    assert 0 < budget.tokens(short) < budget.tokens(long)


def test_a_budget_below_one_token_is_refused_when_declared() -> None:
    with pytest.raises(DefinitionError, match="at least 1"):
        TokenBudget(0, counter=words)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "x " * 20


async def test_an_agent_with_a_budget_shows_the_model_a_fitting_history_and_stores_all() -> None:
    model = ScriptedModel(["first answer", call("lookup", {"key": "k"}), "second answer"])
    agent = Agent(
        model,
        [lookup],
        instructions="be brief",
        view=TokenBudget(12, counter=words),
        store=MemoryStore(),
    )
    first = await agent.run("an old question of seven words here")
    result = await agent.resume(first.run_id, message="new question")
    shown = [m.role for m in model.requests[-1].messages]
    assert shown == ["system", "user", "assistant", "tool"]
    assert model.requests[-1].messages[1] == UserMessage(content="new question")
    assert len(result.messages) == 7  # the store keeps everything
