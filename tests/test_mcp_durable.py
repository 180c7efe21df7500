"""MCP tools across processes: a run suspended on an MCP tool's approval, or on the server's
question (elicitation), resumes in another process that starts the server anew; the answer
may come over loopstate's HTTP result route, from a server reached over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_support import files_agent, forked_children_env, http_files, stdio_files
from service_support import in_uvicorn
from support import forking

from loopstate import DecisionError, RunNotResumable
from loopstate.engine.models.scripted import call
from loopstate.service import Service
from loopstate.tools.mcp import MCPServer

CHILD = Path(__file__).with_name("mcp_child.py")

pytestmark = pytest.mark.slow  # each test starts real MCP server processes
CONFIRMATION = {
    "type": "object",
    "properties": {"confirm": {"title": "Confirm", "type": "boolean"},
                   "reason": {"title": "Reason", "type": "string"}},
    "required": ["confirm", "reason"],
}  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("alpha\nbeta\n")
    return files


def resume_elsewhere(db: Path, root: Path, script: list[Any], resume: dict[str, Any]) -> Any:
    """Resume run-1 in another process; what it printed."""
    done = forking.run(
        [sys.executable, str(CHILD), str(db), str(root), json.dumps(script), json.dumps(resume)],
        capture_output=True, text=True, timeout=120, cwd=CHILD.parent, env=forked_children_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


async def test_a_run_suspended_on_an_mcp_tool_resumes_in_another_process(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "runs.db"
    script = [{"call": "files_write_file", "arguments": {"path": "out.txt", "content": "hi"}},
              "Written."]  # fmt: skip
    first = await files_agent(db, [call("files_write_file", script[0]["arguments"])],
                              stdio_files(root)).run("write")  # fmt: skip
    (pending,) = first.pending
    assert not (root / "out.txt").exists()
    shown = forking.run(
        [sys.executable, "-m", "loopstate", "runs", "show", "run-1", "--db", str(db)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    listing = shown.stdout.split("waiting for a decision:\n")[1].splitlines()
    assert listing[1] == (
        "      files_write_file needs approval, its server says destructive (MCP server "
        "'files'; annotations: readOnlyHint=False, destructiveHint=True)"
    )
    done = resume_elsewhere(db, root, script, {"decisions": {pending.call_id: "approve"}})
    assert done == {"status": "done", "output": "Written.",
                    "told": ["wrote 2 characters to out.txt"]}  # fmt: skip
    assert (root / "out.txt").read_text() == "hi"


async def test_a_pending_call_whose_tool_changed_its_schema_is_refused_at_resume(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "runs.db"
    script = [call("files_write_file", {"path": "a.txt", "content": "x"}), "ok"]
    first = await files_agent(db, script, stdio_files(root)).run("write")
    (root / "VARIANT").touch()  # the server, upgraded, lists write_file with another schema
    with pytest.raises(RunNotResumable, match="files_write_file waiting under another schema"):
        await files_agent(db, script, stdio_files(root)).resume("run-1")
    (root / "VARIANT").unlink()
    later = files_agent(db, script, stdio_files(root))
    assert (await later.resume("run-1", results=None)).status == "awaiting_approval"
    assert first.pending[0].call_id == (await later.pending("run-1"))[0].call_id


async def test_an_elicitation_suspends_the_run_and_another_process_answers_it(
    tmp_path: Path, root: Path
) -> None:
    """The server's session does not outlive the wait (its process ends with the run's): the
    call is made again from the start in the resuming process, the server asks again (its
    resolver runs twice) and gets the recorded answer at once; the person is asked once."""
    db = tmp_path / "runs.db"
    asked = [{"call": "files_delete_confirmed", "arguments": {"path": "notes.txt"}}, "Deleted."]
    agent = files_agent(db, [call("files_delete_confirmed", {"path": "notes.txt"})],
                        stdio_files(root, needs_approval={"delete_confirmed": False}))  # fmt: skip
    first = await agent.run("delete notes")
    (pending,) = first.pending
    assert (pending.reason, pending.external) == ("Really delete notes.txt?", True)
    stored = (await agent.store.load("run-1")).batch[0]
    assert stored.result_schema == CONFIRMATION
    with pytest.raises(DecisionError, match="refused"):
        await agent.resume("run-1", results={pending.call_id: {"confirm": "maybe"}})
    answer = {"confirm": True, "reason": "obsolete"}
    done = resume_elsewhere(db, root, asked, {"results": {pending.call_id: answer}})
    assert done == {"status": "done", "output": "Deleted.",
                    "told": ["deleted notes.txt: obsolete"]}  # fmt: skip
    # the server's resolver runs at every round: the first call's, then the resuming
    # process's two (asked again and answered at once from the record, then the answer's)
    assert (root / "asked.log").read_text() == "notes.txt\n" * 3
    assert not (root / "notes.txt").exists()


@pytest.fixture
async def service_url(tmp_path: Path, root: Path) -> AsyncIterator[str]:
    with http_files(root) as mcp_url:
        files = MCPServer.http(mcp_url, namespace="files",
                               needs_approval={"delete_confirmed": False})  # fmt: skip
        script = [call("files_delete_confirmed", {"path": "notes.txt"}), "Deleted."]
        agent = files_agent(tmp_path / "runs.db", script, files)
        service = Service({"files": agent})
        async with in_uvicorn(service) as base:
            yield base


async def until(client: httpx.AsyncClient, path: str, ready: Any) -> Any:
    for _ in range(3000):
        body = (await client.get(path)).json()
        if ready(body):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never got ready")


async def test_an_elicitation_from_an_http_server_is_answered_over_http(
    service_url: str, root: Path
) -> None:
    async with httpx.AsyncClient(base_url=service_url, timeout=60) as client:
        started = await client.post("/api/agents/files/runs", json={"prompt": "delete notes"})
        run_id = started.json()["run_id"]
        items = await until(client, f"/api/approvals?run_id={run_id}", lambda b: b["items"])
        (item,) = items["items"]
        assert (item["reason"], item["external"]) == ("Really delete notes.txt?", True)
        assert item["result_schema"] == CONFIRMATION
        path = f"/api/runs/{run_id}/calls/{item['call_id']}/result"
        bad = await client.post(path, json={"value": {"confirm": True}},
                                headers={"Idempotency-Key": "a0"})  # fmt: skip
        assert bad.status_code == 422
        answer = {"value": {"confirm": True, "reason": "old"}}
        good = await client.post(path, json=answer, headers={"Idempotency-Key": "a1"})
        assert good.status_code == 200, good.text
        run = await until(client, f"/api/runs/{run_id}", lambda b: b["status"] == "done")
    told = [m["content"] for m in run["messages"] if m["role"] == "tool"]
    assert told == ["deleted notes.txt: old"]
    assert (root / "asked.log").read_text() == "notes.txt\n" * 3  # rounds, as above
