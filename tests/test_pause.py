"""Pause (`agent.pause`, `loopstate pause`, `POST /api/runs/{id}/pause`): a run driven by
another process stops at its next step boundary, rests in `paused` with nothing in flight and
its lease released, and resumes to the same end as a run that was never paused. A run that
waits for a decision stays as it is. The driving process is real; it waits on its stdin, the
test on its stdout: no sleeps."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from service_support import in_uvicorn
from support import forking
from support.cli import loopstate

from loopstate import Agent, Approve, MemoryStore, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call
from loopstate.service import Service

TESTS = Path(__file__).parent


@tool
async def step(n: int) -> str:
    """Do one step of the job."""
    return f"step {n} done"


def script() -> ScriptedModel:
    return ScriptedModel([call("step", {"n": 1}), call("step", {"n": 2}), "All steps done."])


@pytest.fixture
def driven(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A run driven by a child process, its tool's first call in progress."""
    db = str(tmp_path / "runs.db")
    child = forking.Popen(
        [sys.executable, str(TESTS / "pause_child.py"), db, "run-1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    with child:
        assert child.stdout is not None
        assert child.stdout.readline() == "step 1 started\n"
        yield db, child
        child.kill()


def by_python(db: str) -> Callable[[], Awaitable[bool]]:
    async def ask() -> bool:
        return await Agent(script(), [step], store=SQLiteStore(db)).pause("run-1")

    return ask


def by_cli(db: str) -> Callable[[], Awaitable[bool]]:
    async def ask() -> bool:
        done = loopstate("pause", "run-1", "--db", db, cwd=Path(db).parent)
        assert done.returncode == 0, done.stderr
        return "pause asked" in done.stdout

    return ask


def by_http(db: str) -> Callable[[], Awaitable[bool]]:
    async def ask() -> bool:
        store = SQLiteStore(db)
        service = Service({"job": Agent(script(), [step], store=store)})
        async with in_uvicorn(service) as url, httpx.AsyncClient(base_url=url) as client:
            answer = await client.post("/api/runs/run-1/pause")
        store.close()
        assert answer.status_code == 202
        assert answer.json()["status"] == "running"
        return bool(answer.json()["asked"])

    return ask


@pytest.mark.parametrize("door", [by_python, by_cli, by_http])
async def test_a_run_paused_from_another_process_stops_after_its_step_and_resumes_to_the_same_end(
    driven: tuple[str, subprocess.Popen[str]], door: Callable[[str], Callable[[], Awaitable[bool]]]
) -> None:
    db, child = driven
    assert await door(db)()
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write("\n")  # the tool's call finishes: its step is not cut short
    child.stdin.flush()
    assert child.stdout.readline() == "stopped paused\n"
    assert child.wait() == 0
    store = SQLiteStore(db)
    paused = await store.load("run-1")
    assert (paused.state, paused.status, paused.steps) == ("paused", "paused", 1)
    assert [c.status for c in paused.calls] == ["succeeded"]  # nothing half-done
    last = paused.transitions[-1]
    assert (last.source, last.target, last.event) == ("thinking", "paused", "pause")
    assert await store.pause_asked("run-1") is None  # the request was taken

    resumed = await Agent(
        ScriptedModel([call("step", {"n": 2}), "All steps done."]), [step], store=store
    ).resume("run-1")  # the lease was released: any process continues it
    unpaused = await Agent(script(), [step], store=MemoryStore()).run("do the job")
    assert (resumed.status, resumed.output) == (unpaused.status, unpaused.output)
    assert [m.content for m in resumed.messages] == [m.content for m in unpaused.messages]
    assert any(t.event == "unpause" for t in resumed.transitions)
    store.close()


@tool(needs_approval=True)
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


async def test_pausing_a_run_that_waits_for_a_decision_leaves_it_waiting() -> None:
    agent = Agent(ScriptedModel([call("send", {"to": "bob"}), "Sent."]), [send],
                  store=MemoryStore())  # fmt: skip
    waiting = await agent.run("send it")
    assert await agent.pause(waiting.run_id) is False
    assert await agent.store.pause_asked(waiting.run_id) is None
    (pending,) = waiting.pending
    done = await agent.resume(waiting.run_id, {pending.call_id: Approve()})
    assert (done.status, done.output) == ("done", "Sent.")
