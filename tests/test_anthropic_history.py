"""The fast Anthropic path's messages (`provider_history.py`: only what a history gained is
transformed) against litellm's whole transform of the same history, at every step of varied
histories: parallel calls, thinking and redacted thinking, text with trailing whitespace,
user messages between tool results, answers without calls, two answers in a row, a system
prompt or none."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    Origin,
    RedactedThinkingBlock,
    SystemMessage,
    ThinkingBlock,
    ToolMessage,
    UserMessage,
    tool_call,
)
from loopstate.engine.models.litellm import _import_litellm
from loopstate.engine.models.wire import provider_messages

NAME = "anthropic/claude-sonnet-4-5"
ORIGIN = Origin(provider="anthropic", model=NAME)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+Pd3bE5IDKsIA=="


def _assistant(rng: random.Random, step: int) -> list[Message]:
    calls = tuple(
        tool_call(f"toolu_{step}_{n}", "read_file", json.dumps({"path": f"{step}.md"}))
        for n in range(rng.choice([0, 1, 1, 2, 3]))
    )
    text = rng.choice([None, "Reading.", "Reading.  ", "Done.\n", ""])
    if not calls and not text:
        text = "Answer."
    block = ThinkingBlock(thinking="Hmm.", signature=SIGNATURE)
    thinking = rng.choice([None, (block,), (block, RedactedThinkingBlock(data=SIGNATURE))])
    turn = AssistantMessage(content=text, tool_calls=calls or None, thinking_blocks=thinking,
                            origin=ORIGIN)  # fmt: skip
    out: list[Message] = [turn]
    for call in calls:
        out.append(ToolMessage(tool_call_id=call.id, content=rng.choice(["1", "", "x\n"])))
    # a user message after an answer, mostly (else two assistant turns in a row, merged)
    if (not calls and rng.random() < 0.8) or (calls and rng.random() < 0.2):
        out.append(UserMessage(content=rng.choice(["go on", "and then? ", "ünïcode ✓"])))
    return out


def _histories(seed: int) -> list[list[Message]]:
    rng = random.Random(seed)
    start: list[Message] = [SystemMessage(content="You read.")] if seed % 2 else []
    history = [*start, UserMessage(content="Summarise the repository.")]
    states = [list(history)]
    for step in range(12):
        history += _assistant(rng, step)
        states.append(list(history))
    return states


def _whole(history: list[Message], config: Any) -> tuple[list[Any], list[Any]]:
    """What litellm makes of the whole history: `completion`'s message fixes, then
    `AnthropicConfig.transform_request`."""
    from litellm.litellm_core_utils.prompt_templates.common_utils import get_completion_messages
    from litellm.utils import validate_and_fix_openai_messages

    messages = validate_and_fix_openai_messages(messages=provider_messages(history, ORIGIN))
    messages = get_completion_messages(
        messages=messages, ensure_alternating_roles=False, user_continue_message=None,
        assistant_continue_message=None,
    )  # fmt: skip
    tool = {"name": "read_file", "input_schema": {"type": "object"}}
    data = config.transform_request(
        model="claude-sonnet-4-5", messages=messages, optional_params={"tools": [tool]},
        litellm_params={}, headers={},
    )  # fmt: skip
    return data.get("system", []), data["messages"]


@pytest.mark.parametrize("seed", range(12))
def test_each_step_of_a_history_makes_the_messages_litellms_whole_transform_makes(
    seed: int,
) -> None:
    litellm = _import_litellm()  # before the modules that import litellm: its offline defaults
    from loopstate.engine.models.provider_history import Histories
    from loopstate.engine.models.provider_http import encoded, encoder

    config = litellm.ProviderConfigManager.get_provider_chat_config(
        model=NAME, provider=litellm.LlmProviders.ANTHROPIC
    )
    histories = Histories(config, rounds=True)
    compact = seed % 2 == 0  # the turns kept encoded, as either kind of client encodes
    histories.encode = encoder(compact)
    closed = 0
    for state in _histories(seed):
        made = histories.fields(tuple(state), ORIGIN, {"model": "claude-sonnet-4-5"})
        assert made is not None
        got, coded = made
        assert (got["system"] or [], got["messages"]) == _whole(state, config)
        closed = max(closed, histories._last(tuple(state)).closed)
        # the body's bytes, with the kept turns' encodings, are those of the body encoded whole
        body = {"model": "claude-sonnet-4-5", **got, "max_tokens": 64}
        assert len(coded) == len(histories._last(tuple(state)).turns) <= len(got["messages"])
        assert encoded(body, compact=compact, coded=coded) == encoder(compact)(body)
    assert closed > 0  # rounds were closed and reused, not every history transformed whole
