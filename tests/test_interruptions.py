"""An interrupted run is not an aborted one: Ctrl-C (SIGINT), SIGTERM and a cancelled task leave
a run as a SIGKILL would, its last saved transition standing and its lease released, and a new
process resumes it to the end. Real child processes, a real model server over HTTP."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from model_server import serve, stalled
from support import forking

from loopstate import Agent, MemoryStore, RunNotFound, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

CHILD = Path(__file__).with_name("interrupt_child.py")
RUN = "run-interrupted"


class Child:
    def __init__(self, root: Path, model: str) -> None:
        """`model`: the model server's base URL, or the tool a scripted model calls."""
        self.root, self.model, self.db = root, model, root / "runs.db"

    def start(self, mode: str, *extra: str) -> subprocess.Popen[str]:
        argv = [str(self.db), str(self.root), self.model, mode, RUN, *extra]
        return forking.Popen([sys.executable, str(CHILD), *argv], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip

    def interrupted(self, proc: subprocess.Popen[str], how: signal.Signals) -> str:
        """Interrupt `proc` by `how`; what it wrote on stderr (after asserting its exit)."""
        proc.send_signal(how)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 128 + how, err
        return err

    def resume(self, *extra: str) -> dict[str, object]:
        proc = self.start("resume", *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return result

    def tool_starts(self) -> list[str]:
        return (self.root / "log.txt").read_text().splitlines()

    def stored(self) -> tuple[str, str | None]:
        state = asyncio.run(SQLiteStore(self.db).load(RUN))
        return state.state, state.stop_reason


def wait_for_tool_start(proc: subprocess.Popen[str], name: str) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == f"tool {name} started"


ONE_LINE = f"interrupted; resume with: loopstate resume {RUN} --agent MODULE:ATTR\n"


def test_sigint_mid_tool_leaves_the_run_to_resume_with_the_tool_reported_unknown(
    tmp_path: Path,
) -> None:
    child = Child(tmp_path, "charge")
    proc = child.start("run")
    wait_for_tool_start(proc, "charge")
    err = child.interrupted(proc, signal.SIGINT)
    assert err == ONE_LINE  # one line, no traceback
    assert child.stored() == ("executing_tool", None)  # not aborted: as a SIGKILL leaves it
    done = child.resume()  # a new process, at once: the lease was released
    assert done["status"] == "done"
    assert "told: Error: interrupted, outcome unknown." in str(done["output"])
    assert child.tool_starts() == ["tool charge"]  # not run again


def test_sigterm_mid_tool_leaves_the_run_and_an_idempotent_tool_runs_again(
    tmp_path: Path,
) -> None:
    child = Child(tmp_path, "put")
    proc = child.start("run")
    wait_for_tool_start(proc, "put")
    assert child.interrupted(proc, signal.SIGTERM) == ONE_LINE
    assert child.stored() == ("executing_tool", None)
    assert child.resume() == {"status": "done", "output": "told: put done"}
    assert child.tool_starts() == ["tool put", "tool put"]  # run again: it is idempotent


def test_sigint_mid_model_call_leaves_the_run_to_call_the_model_again(tmp_path: Path) -> None:
    with serve(stalled()) as server:
        child = Child(tmp_path, server.openai_base)
        proc = child.start("run")
        server.wait_for_requests(1)  # the model call is in flight
        assert child.interrupted(proc, signal.SIGINT) == ONE_LINE
        server.wait_for_disconnects(1)  # the call was cut off, not left hanging
    assert child.stored() == ("thinking", None)
    # A new process (a scripted model: no second litellm import) calls the model again.
    done = Child(tmp_path, "charge").resume()
    assert done == {"status": "done", "output": "told: charge done"}
    assert child.tool_starts() == ["tool charge"]


async def test_a_timeout_around_run_leaves_a_run_that_resumes() -> None:
    started = asyncio.Event()
    block = True
    runs = 0

    @tool
    async def slow(x: int) -> str:
        """Takes its time."""
        nonlocal runs
        runs += 1
        started.set()
        if block:
            await asyncio.Event().wait()  # until cancelled
        return "slow done"

    store = MemoryStore()
    model = ScriptedModel([call("slow", {"x": 1}), "finished"], by_step=True)
    agent = Agent(model, [slow], store=store, auto_approve=True)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(agent.run("go", run_id="r1"), 0.1)
    stored = await store.load("r1")
    assert (stored.status, stored.stop_reason) == ("running", None)  # not aborted
    mid_tool, block = started.is_set(), False
    result = await agent.resume("r1")  # the lease was released: no RunBusy
    assert (result.status, result.output) == ("done", "finished")
    assert runs == 1  # not idempotent: once interrupted, reported unknown, never run again
    told = result.messages[-2].content or ""
    assert ("interrupted, outcome unknown" in told) if mid_tool else told == "slow done"


def test_run_sync_errors_are_not_chained_to_a_missing_event_loop() -> None:
    agent = Agent(ScriptedModel(["hi"]), store=MemoryStore())
    with pytest.raises(RunNotFound) as raised:
        agent.resume_sync("no-such-run")
    # `asyncio.run` is no longer called while handling "no running event loop"
    chain, error = [], raised.value.__context__
    while error is not None:
        chain.append(str(error))
        error = error.__context__
    assert not any("event loop" in said for said in chain), chain


def test_loopstate_resume_interrupted_prints_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    child = Child(tmp_path, "put")
    first = child.start("run")
    wait_for_tool_start(first, "put")
    child.interrupted(first, signal.SIGINT)
    resume = forking.Popen(
        [sys.executable, "-m", "loopstate", "resume", RUN, "--agent", "interrupt_agent:agent",
         "--db", str(child.db)],
        cwd=CHILD.parent, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert resume.stdout is not None
    assert resume.stdout.readline().strip() == "tool put started"  # run again: idempotent
    assert child.interrupted(resume, signal.SIGINT) == (
        f"interrupted; resume with: loopstate resume {RUN} --agent interrupt_agent:agent\n"
    )
    assert child.stored() == ("executing_tool", None)
    assert child.resume() == {"status": "done", "output": "told: put done"}
