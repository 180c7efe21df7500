"""MCP servers' tools in an agent: a real server (the SDK's `MCPServer`, started by the test
as a subprocess on stdio) listed with its schemas, gated by its annotations unless a policy
says otherwise, its results as it gave them, and its failures as tool errors the run survives."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp_support import files_agent, stdio_files

from loopstate import ApprovalPolicy, Approve, Rule
from loopstate.engine.models.scripted import call, calls

pytestmark = pytest.mark.slow  # each test starts real MCP server processes


@pytest.fixture
def root(tmp_path: Path) -> Path:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("alpha\nbeta\n")
    return files


def tool_messages(agent_model: object) -> list[str]:
    requests = agent_model.requests  # type: ignore[attr-defined]
    return [m.content for m in requests[-1].messages if m.role == "tool"]


async def test_its_tools_are_listed_with_their_schemas_namespaced_and_filtered(
    tmp_path: Path, root: Path
) -> None:
    files = stdio_files(root, include=["read_*", "write_file", "file_*"], exclude=["file_info"])
    agent = files_agent(tmp_path / "runs.db", ["hi"], files)
    await agent.run("hello")
    (request,) = agent.model.requests  # type: ignore[attr-defined]
    shown = {t.name: t for t in request.tools}
    assert sorted(shown) == ["files_read_file", "files_write_file"]
    assert shown["files_write_file"].description == "Write a text file, replacing it."
    assert shown["files_write_file"].parameters == {
        "type": "object",
        "properties": {
            "path": {"title": "Path", "type": "string"},
            "content": {"title": "Content", "type": "string"},
        },
        "required": ["path", "content"],
    }
    assert agent.tools.get("files_read_file").idempotent is False  # type: ignore[union-attr]
    idempotent = stdio_files(root, include=["delete_file"])
    await files_agent(tmp_path / "other.db", ["hi"], idempotent).run("hello")
    assert [t.idempotent for t in await idempotent.list_tools()] == [True]


async def test_a_destructive_tool_waits_for_approval_and_a_read_only_one_runs(
    tmp_path: Path, root: Path
) -> None:
    script = [
        calls(call("files_read_file", {"path": "notes.txt"}),
              call("files_write_file", {"path": "out.txt", "content": "gamma"})),
        "Copied.",
    ]  # fmt: skip
    agent = files_agent(tmp_path / "runs.db", script, stdio_files(root))
    first = await agent.run("copy")
    assert first.status == "awaiting_approval"
    (pending,) = first.pending
    assert pending.tool == "files_write_file"
    assert "its server says destructive" in pending.reason
    assert pending.metadata["mcp"] == {
        "server": "files",
        "tool": "write_file",
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    }
    assert not (root / "out.txt").exists()
    done = await agent.resume("run-1", {pending.call_id: Approve()})
    assert (done.status, (root / "out.txt").read_text()) == ("done", "gamma")
    assert tool_messages(agent.model) == ["alpha\nbeta\n", "wrote 5 characters to out.txt"]


async def test_a_policy_and_needs_approval_win_over_the_annotations(
    tmp_path: Path, root: Path
) -> None:
    policy = ApprovalPolicy(Rule(name="writes-ok", decision="approve", pattern="files_write_*"))
    files = stdio_files(root, needs_approval={"read_file": True})
    script = [
        calls(call("files_write_file", {"path": "a.txt", "content": "x"}),
              call("files_read_file", {"path": "notes.txt"})),
        "ok",
    ]  # fmt: skip
    agent = files_agent(tmp_path / "runs.db", script, files, approver=policy)
    first = await agent.run("go")
    (pending,) = first.pending  # the write, destructive, was approved by the rule
    assert pending.tool == "files_read_file"  # read-only, gated by the user's word
    assert "needs_approval['read_file']" in pending.reason
    done = await agent.resume("run-1", {pending.call_id: Approve()})
    assert (done.status, (root / "a.txt").read_text()) == ("done", "x")


async def test_a_remembered_approval_covers_the_mcp_tools_later_calls(
    tmp_path: Path, root: Path
) -> None:
    script = [
        call("files_write_file", {"path": "a.txt", "content": "1"}),
        call("files_write_file", {"path": "b.txt", "content": "2"}),
        "both",
    ]
    agent = files_agent(tmp_path / "runs.db", script, stdio_files(root))
    first = await agent.run("write two")
    (pending,) = first.pending
    done = await agent.resume("run-1", {pending.call_id: Approve(remember=True)})
    assert done.status == "done"  # the second write ran without asking
    assert ((root / "a.txt").read_text(), (root / "b.txt").read_text()) == ("1", "2")


async def test_results_keep_text_structured_content_images_and_errors(
    tmp_path: Path, root: Path
) -> None:
    script = [
        calls(call("files_file_info", {"path": "notes.txt"}), call("files_picture", {}),
              call("files_missing", {"path": "nope.txt"})),
        "seen",
    ]  # fmt: skip
    agent = files_agent(tmp_path / "runs.db", script, stdio_files(root))
    done = await agent.run("look")
    assert done.status == "done"
    info, picture, missing = tool_messages(agent.model)
    assert json.loads(info) == {"path": "notes.txt", "lines": 2, "size": 11}
    assert picture == "[image image/png, 16 bytes]"
    assert missing.startswith("Error: files_missing raised MCPToolError: ")
    assert "no such file: nope.txt" in missing


async def test_a_server_killed_mid_call_is_a_tool_error_and_the_next_call_works(
    tmp_path: Path, root: Path
) -> None:
    script = [call("files_crash", {}), call("files_read_file", {"path": "notes.txt"}), "fine"]
    agent = files_agent(tmp_path / "runs.db", script, stdio_files(root))
    done = await agent.run("crash it")
    assert done.status == "done"
    requests = agent.model.requests  # type: ignore[attr-defined]
    crashed = requests[1].messages[-1].content
    assert "closed the connection during the call" in crashed
    assert requests[2].messages[-1].content == "alpha\nbeta\n"


async def test_a_server_that_hangs_past_the_timeout_is_a_tool_error_and_is_restarted(
    tmp_path: Path, root: Path
) -> None:
    script = [call("files_stall", {}), call("files_read_file", {"path": "notes.txt"}), "fine"]
    agent = files_agent(tmp_path / "runs.db", script, stdio_files(root, timeout=1.0))
    done = await agent.run("wait")
    requests = agent.model.requests  # type: ignore[attr-defined]
    assert done.status == "done"
    assert requests[1].messages[-1].content == (
        "Error: files_stall raised MCPToolError: stall did not answer within 1 s; "
        "the MCP server 'files' is started anew for the next call"
    )
    assert requests[2].messages[-1].content == "alpha\nbeta\n"


async def test_a_server_that_cannot_start_fails_the_run_start_with_one_line(
    tmp_path: Path,
) -> None:
    from loopstate.tools.mcp import MCPServer, MCPToolError

    broken = MCPServer.stdio(sys.executable, ["-c", "raise SystemExit(3)"], name="broken")
    agent = files_agent(tmp_path / "runs.db", ["hi"], broken)
    with pytest.raises(MCPToolError, match="MCP server 'broken' could not be reached"):
        await agent.run("hello")


async def test_the_server_starts_at_the_runs_first_need_and_stops_when_the_run_stops(
    tmp_path: Path, root: Path
) -> None:
    files = stdio_files(root)
    agent = files_agent(tmp_path / "runs.db", [call("files_read_file", {"path": "notes.txt"}),
                                               "read"], files)  # fmt: skip
    assert not (root / "pids.log").exists()  # building the agent starts nothing
    assert (await agent.run("read")).status == "done"
    (pid,) = map(int, (root / "pids.log").read_text().split())  # one server for the run
    with pytest.raises(ProcessLookupError):  # ended, and reaped, when the run stopped
        os.kill(pid, 0)


async def test_a_pre_2026_servers_mid_call_question_is_a_durable_wait_too(
    tmp_path: Path, root: Path
) -> None:
    files = stdio_files(root, protocol="legacy", needs_approval={"rename_asking": False})
    script = [call("files_rename_asking", {"path": "notes.txt"}), "Renamed."]
    agent = files_agent(tmp_path / "runs.db", script, files)
    first = await agent.run("rename")
    (pending,) = first.pending
    assert (pending.reason, pending.external) == ("New name for notes.txt?", True)
    assert (root / "notes.txt").exists()  # the server was told "cancel"; its result set aside
    done = await agent.resume("run-1", results={pending.call_id: {"name": "n.txt"}})
    assert done.status == "done"
    assert tool_messages(agent.model) == ["renamed notes.txt to n.txt"]
    assert (root / "asked.log").read_text() == "notes.txt\n" * 2  # the call, made again


def test_a_flow_phase_refuses_an_mcp_server_in_its_own_tools(root: Path) -> None:
    from loopstate import Phase, ScriptedModel
    from loopstate.engine.errors import DefinitionError
    from loopstate.machines.flows.phase import BoundPhase

    phase = Phase(tools=[stdio_files(root)])  # type: ignore[list-item]
    with pytest.raises(DefinitionError, match="give it to an agent phase's Agent"):
        BoundPhase.build("work", phase, ScriptedModel(["ok"]))
