"""The plugin's fixture in this suite, against a cassette committed in tests/cassettes/.

The committed cassette also pins the format: a version-1 cassette written by an earlier
loopstate must keep replaying. Re-record with `pytest tests/test_replay_fixture.py
--loopstate-record` only when the change to the format is deliberate.
"""

from __future__ import annotations

from support import make_tools

from loopstate import Agent, Approve, Deny, ScriptedModel
from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.models.scripted import call, calls
from loopstate.pytest_plugin import CassetteFixture

SCRIPT = [
    calls(call("read_file", {"path": "notes.md"}), call("write_file", {"path": "notes.md",
          "content": "fixed"}), call("write_file", {"path": "/etc/passwd", "content": "x"})),
    "Fixed notes.md; writing outside the workspace was refused.",
]  # fmt: skip


async def reviewer(requests: list[ApprovalRequest]) -> dict[str, Approve | Deny]:
    return {r.call_id: Approve() if not r.arguments["path"].startswith("/") else Deny("outside")
            for r in requests}  # fmt: skip


async def test_a_committed_cassette_replays_with_no_tool_run(
    loopstate_cassette: CassetteFixture,
) -> None:
    counted, tools = make_tools()
    agent = Agent(ScriptedModel(SCRIPT), tools, instructions="Fix notes.", approver=reviewer)
    result = await loopstate_cassette.run(agent, "Fix the typo in notes.md")
    assert result.output == "Fixed notes.md; writing outside the workspace was refused."
    decided = [(e.tool, e.outcome) for e in result.events if e.kind == "tool_approval"]
    assert decided == [("write_file", "approve"), ("write_file", "deny")]
    if not loopstate_cassette.recording:
        assert sum(counted.values()) == 0


def test_a_cassette_recorded_before_reply_ids_replays_them_as_unknown() -> None:
    from pathlib import Path

    from loopstate.engine.model import ModelResponse
    from loopstate.engine.recording.cassette import Cassette

    path = Path(__file__).with_name("cassettes") / (
        "test_a_committed_cassette_replays_with_no_tool_run.jsonl"
    )
    assert "response_id" not in path.read_text()  # written before ModelResponse had one
    turns = [r for r in Cassette.load(path).records if r.get("kind") == "model"]
    assert turns
    replies = [ModelResponse.model_validate(turn["response"]) for turn in turns]
    assert all(reply.response_id is None for reply in replies)
