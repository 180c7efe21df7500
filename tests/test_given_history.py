"""`agent.run(history)` whose last assistant turn asks for calls with no results: they are
that turn's batch (gated ones wait, ungated ones run), over real HTTP to a model server that
counts requests — the dangling turn is never sent to the model."""

from __future__ import annotations

from pathlib import Path

from model_server import serve, text_reply
from test_fork import agent, counted_tools, told

from loopstate import Approve, AssistantMessage, ToolCall, ToolMessage, UserMessage
from loopstate.engine.messages import FunctionCall


def asked(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(
            ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls
        )
    )


async def test_gated_calls_of_the_given_turn_wait_and_ungated_ones_run(tmp_path: Path) -> None:
    history = [
        UserMessage(content="Copy a to b."),
        asked(
            ("r1", "read_file", '{"path": "a"}'),
            ("w1", "write_file", '{"path": "b", "content": "x"}'),
        ),
    ]
    with serve(text_reply("Copied.")) as server:
        runs, tools = counted_tools()
        a = agent(server, tmp_path / "runs.db", tools)
        waiting = await a.run(history)
        assert (waiting.status, [p.call_id for p in waiting.pending]) == (
            "awaiting_approval",
            ["w1"],
        )
        assert len(server.requests) == 0
        assert runs["read_file"] == 0
        result = await a.resume(waiting.run_id, {"w1": Approve()})

    assert (result.output, len(server.requests)) == ("Copied.", 1)
    assert runs == {"read_file": 1, "write_file": 1}
    assert told(server.bodies[0])[-2:] == ["contents of a", "wrote b"]


async def test_only_the_calls_without_results_run(tmp_path: Path) -> None:
    history = [
        UserMessage(content="Read a and c."),
        asked(("r1", "read_file", '{"path": "a"}'), ("r2", "read_file", '{"path": "c"}')),
        ToolMessage(tool_call_id="r1", content="given result of a"),
    ]
    with serve(text_reply("Read both.")) as server:
        runs, tools = counted_tools()
        result = await agent(server, tmp_path / "runs.db", tools).run(history)

    assert (result.output, runs["read_file"]) == ("Read both.", 1)
    assert told(server.bodies[0])[-2:] == ["given result of a", "contents of c"]
    assert [t.event for t in result.transitions][:3] == ["start", "replied", "tools_done"]
