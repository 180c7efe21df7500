"""Real-shaped provider replies over real HTTP through LiteLLMModel and whole runs: what each
provider needs back reaches it, and only it. The request bodies on the wire are asserted."""

from __future__ import annotations

import json
from typing import Any

import provider_replies as pr
from model_server import ModelServer, raw_reply, serve
from support import make_tools

from loopstate import Agent, Approve, Deny, LiteLLMModel
from loopstate.engine.messages import AssistantMessage, RedactedThinkingBlock, ThinkingBlock

THINK = {"type": "enabled", "budget_tokens": 1024}


def claude(server: ModelServer) -> LiteLLMModel:
    return LiteLLMModel(
        "anthropic/claude-sonnet-4-5",
        api_base=server.url,
        api_key="sk-ant-test",
        thinking=THINK,
        max_tokens=2048,
    )


def compatible(server: ModelServer, name: str) -> LiteLLMModel:
    return LiteLLMModel(name, api_base=server.openai_base, api_key="sk-test")


def read(path: str) -> str:
    return json.dumps({"path": path})


async def test_a_claude_thinking_tool_call_goes_back_led_by_its_signed_thinking_block() -> None:
    _, tools = make_tools()
    with serve(
        raw_reply(pr.anthropic_thinking_tool_use()), raw_reply(pr.anthropic_text("A has # A."))
    ) as server:
        result = await Agent(claude(server), tools).run("Read a.md")
    assert (result.status, result.output) == ("done", "A has # A.")
    assert server.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The user wants a.md. I should read it with read_file.",
                    "signature": pr.SIGNATURE,
                },
                {"type": "text", "text": "I'll read the file."},
                {
                    "type": "tool_use",
                    "id": "toolu_01CswdEQBMshySk6Y9DFKrfq",
                    "name": "read_file",
                    "input": {"path": "a.md"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01CswdEQBMshySk6Y9DFKrfq",
                    "content": "contents of a.md",
                }
            ],
        },
    ]
    assert server.bodies[1]["thinking"] == THINK


async def test_claude_thinking_is_kept_in_history_events_and_usage() -> None:
    _, tools = make_tools()
    with serve(
        raw_reply(pr.anthropic_thinking_tool_use()), raw_reply(pr.anthropic_text("Done."))
    ) as server:
        result = await Agent(claude(server), tools).run("Read a.md")
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.thinking_blocks == (
        ThinkingBlock(
            thinking="The user wants a.md. I should read it with read_file.",
            signature=pr.SIGNATURE,
        ),
    )
    assert turn.reasoning == "The user wants a.md. I should read it with read_file."
    assert turn.origin is not None
    assert (turn.origin.provider, turn.origin.model) == ("anthropic", "anthropic/claude-sonnet-4-5")
    responded = [e for e in result.events if e.kind == "model_response"]
    assert responded[0].reasoning == turn.reasoning  # type: ignore[union-attr]
    first = responded[0].usage  # type: ignore[union-attr]
    assert (first.cached_tokens, first.cache_creation_tokens) == (2048, 1024)
    assert result.usage.cached_tokens == 2048
    assert result.usage.cost_known
    assert result.usage.cost_usd is not None


async def test_redacted_thinking_goes_back_unedited_after_the_thinking_it_followed() -> None:
    _, tools = make_tools()
    with serve(
        raw_reply(pr.anthropic_thinking_tool_use(redacted=True)),
        raw_reply(pr.anthropic_text("Done.")),
    ) as server:
        result = await Agent(claude(server), tools).run("Read a.md")
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.thinking_blocks is not None
    assert turn.thinking_blocks[1] == RedactedThinkingBlock(data=pr.REDACTED)
    content = server.bodies[1]["messages"][1]["content"]
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert content[1] == {"type": "redacted_thinking", "data": pr.REDACTED}


async def test_deepseek_reasoning_content_goes_back_on_every_tool_call_turn() -> None:
    _, tools = make_tools()
    with serve(
        raw_reply(pr.deepseek("Need a first.", pr.deepseek_call(1, "a.md"))),
        raw_reply(pr.deepseek("Now b.", pr.deepseek_call(2, "b.md"))),
        raw_reply(pr.deepseek("Both read.", content="Read both.")),
    ) as server:
        result = await Agent(compatible(server, "deepseek/deepseek-reasoner"), tools).run("go")
    assert result.output == "Read both."

    def turn(n: int, reasoning: str, path: str) -> dict[str, Any]:
        call_id = f"call_00_{n}xE1AhVqTbzWxkdKzEw3mN"
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": read(path)},
                }
            ],
            "reasoning_content": reasoning,
        }

    tool_a = {"role": "tool", "tool_call_id": "call_00_1xE1AhVqTbzWxkdKzEw3mN",
              "content": "contents of a.md"}  # fmt: skip
    tool_b = {"role": "tool", "tool_call_id": "call_00_2xE1AhVqTbzWxkdKzEw3mN",
              "content": "contents of b.md"}  # fmt: skip
    assert server.bodies[1]["messages"][1:] == [turn(1, "Need a first.", "a.md"), tool_a]
    assert server.bodies[2]["messages"][1:] == [
        turn(1, "Need a first.", "a.md"),
        tool_a,
        turn(2, "Now b.", "b.md"),
        tool_b,
    ]
    assert (result.usage.cached_tokens, result.usage.reasoning_tokens) == (192, 150)


async def test_groq_reasoning_is_kept_and_goes_back_to_groq_as_reasoning() -> None:
    _, tools = make_tools()
    call = pr._function("fc_7d1c", "read_file", {"path": "a.md"})
    with serve(raw_reply(pr.groq("Read it first.", call)), raw_reply(pr.groq("Done."))) as server:
        result = await Agent(compatible(server, "groq/openai/gpt-oss-20b"), tools).run("go")
    assert isinstance(result.messages[1], AssistantMessage)
    assert result.messages[1].reasoning == "Read it first."
    sent = server.bodies[1]["messages"][1]
    assert sent == {
        "role": "assistant",
        "tool_calls": [
            {"id": "fc_7d1c", "type": "function",
             "function": {"name": "read_file", "arguments": read("a.md")}}
        ],
        "reasoning": "Read it first.",
    }  # fmt: skip


async def test_gemini_empty_ids_become_unique_and_signatures_go_back_on_their_calls() -> None:
    counted, tools = make_tools()
    with serve(
        raw_reply(
            pr.gemini_compat(pr.gemini_call("a.md", signature="CsYBAX=="), pr.gemini_call("b.md"))
        ),
        raw_reply(pr.gemini_compat(text="Both.")),
    ) as server:
        result = await Agent(compatible(server, "openai/gemini-2.5-flash"), tools).run("go")
    assert counted["read_file"] == 2
    assert server.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read_file", "arguments": read("a.md")},
                 "extra_content": {"google": {"thought_signature": "CsYBAX=="}}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "read_file", "arguments": read("b.md")}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "contents of a.md"},
        {"role": "tool", "tool_call_id": "call_2", "content": "contents of b.md"},
    ]  # fmt: skip
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert [(c.id, c.provider_id, c.id_replaced) for c in turn.calls] == [
        ("call_1", "", "empty"),
        ("call_2", "", "empty"),
    ]


async def test_calls_sharing_an_id_in_one_turn_each_run_once_with_their_own_result() -> None:
    counted, tools = make_tools()
    same = [pr._function("call_dup", "read_file", {"path": p}) for p in ("a.md", "b.md")]
    with serve(
        raw_reply(pr.gemini_compat(*same)), raw_reply(pr.gemini_compat(text="ok"))
    ) as server:
        await Agent(compatible(server, "openai/gpt-4o"), tools).run("go")
    assert counted["read_file"] == 2
    sent = server.bodies[1]["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_dup", "call_2"]
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_dup", "content": "contents of a.md"},
        {"role": "tool", "tool_call_id": "call_2", "content": "contents of b.md"},
    ]


async def test_gated_calls_sharing_an_id_are_decided_apart() -> None:
    counted, tools = make_tools()
    same = [pr._function("call_w", "write_file", {"path": p, "content": "x"}) for p in ("a", "b")]
    with serve(
        raw_reply(pr.gemini_compat(*same)), raw_reply(pr.gemini_compat(text="ok"))
    ) as server:
        agent = Agent(compatible(server, "openai/gpt-4o"), tools)
        suspended = await agent.run("go")
        assert [p.call_id for p in suspended.pending] == ["call_w", "call_2"]
        result = await agent.resume(
            suspended.run_id, decisions={"call_w": Approve(), "call_2": Deny("not b")}
        )
    assert result.status == "done"
    assert counted["write_file"] == 1
    tools_sent = server.bodies[1]["messages"][2:]
    assert tools_sent[0] == {"role": "tool", "tool_call_id": "call_w",
                             "content": "wrote 1 bytes to a"}  # fmt: skip
    assert tools_sent[1]["tool_call_id"] == "call_2"
    assert "not b" in tools_sent[1]["content"]
