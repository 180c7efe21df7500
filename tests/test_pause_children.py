"""A child run paused by its own id (`pause_run`, `loopstate pause <child>`) while it works: a
sub-agent's run, or a flow's agent-phase run. It rests in `paused`, and so does the run above
it (the agent whose call delegated to it, or the flow in that phase), its call still waiting
for the child: nothing is recorded as failed. The parent's resume continues the same child
run from where it paused, to the same end as an unpaused run, with no tool run twice. The
child's own resume is refused, naming the run to resume. In one process, on a real SQLite
file: the child's tool waits on an event the test sets once the pause is asked (no sleeps)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from statemachine import State
from support.cli import loopstate

from loopstate import Agent, RunNotResumable, RunResult, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.pause import pause_run
from loopstate.engine.store import Store
from loopstate.engine.tool import Tool
from loopstate.machines.flows import Flow, FlowMachine, Phase


class Held:
    """A child's tools: `hold` says it started and waits until released (each key on its own
    pair of events); `lookup` returns."""

    def __init__(self) -> None:
        self.started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.released: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.ran: list[str] = []

    def tools(self) -> list[Tool]:
        @tool(timeout=60)
        async def hold(key: str) -> str:
            """Hold a key until released."""
            self.ran.append(key)
            self.started[key].set()
            await self.released[key].wait()
            return f"held {key}"

        @tool
        def lookup(key: str) -> str:
            """Look a key up."""
            self.ran.append(key)
            return f"value of {key}"

        return [hold, lookup]

    async def paused_while_held(
        self, store: Store, driven: Awaitable[RunResult], child_of: str, key: str = "h"
    ) -> tuple[RunResult, str]:
        """Drive `driven` until the child's `hold` of `key` runs, pause the child by its id
        (read from the store: the parent names it before it starts), release the tool, and
        return how the drive ended and the child's id."""
        task = asyncio.ensure_future(driven)
        await self.started[key].wait()
        child = await child_of_run(store, child_of)
        assert await pause_run(store, child, actor="ops")
        self.released[key].set()
        return await task, child


async def child_of_run(store: Store, run_id: str) -> str:
    state = await store.load(run_id)
    if state.flow is not None:
        assert state.flow.child is not None
        return state.flow.child
    (record,) = state.calls
    assert record.child_run_id is not None
    return record.child_run_id


def child_script() -> ScriptedModel:
    return ScriptedModel([call("hold", {"key": "h"}), call("lookup", {"key": "a"}), "Found a."])


async def test_a_sub_agent_paused_by_its_id_rests_its_parent_whose_resume_continues_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    child_model = child_script()
    sub = Agent(child_model, held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    helper = sub.as_tool(name="helper", description="Finds things.")
    parent = Agent(parent_model, [helper], store=store)
    stopped, child = await held.paused_while_held(store, parent.run("find a", run_id="p1"), "p1")
    assert (stopped.status, stopped.error) == ("paused", None)
    last = stopped.transitions[-1]
    assert (last.source, last.event, last.target, last.actor) == (
        "executing_tool", "pause", "paused", "ops",
    )  # fmt: skip
    assert last.reason == f"sub-agent helper (run {child}) was paused"
    (record,) = (await store.load("p1")).calls
    assert record.status == "awaiting"  # still waiting for its sub-agent's run
    assert (await store.load(child)).status == "paused"
    assert (held.ran, len(child_model.requests)) == (["h"], 1)

    with pytest.raises(RunNotResumable, match="resume that run"):
        await sub.resume(child)  # a sub-agent's run goes on through its parent
    assert (await store.load(child)).status == "paused"  # unchanged

    done = await parent.resume("p1")
    assert (done.status, done.output) == ("done", "It is a.")
    assert held.ran == ["h", "a"]  # the same child run went on: no tool ran twice
    assert len(child_model.requests) == 3
    assert parent_model.requests[1].messages[-1].content == "Found a."
    assert (await store.load(child)).status == "done"
    moves = [(t.source, t.target) for t in done.transitions]
    assert ("paused", "awaiting_approval") in moves  # unpause: back to waiting for the child
    store.close()


async def test_a_sub_agent_paused_again_while_its_parent_waits_for_it_rests_the_parent_again(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    child_model = ScriptedModel(
        [call("hold", {"key": "h1"}), call("hold", {"key": "h2"}), "Held both."]
    )
    sub = Agent(child_model, held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "hold both"}), "Both held."])
    parent = Agent(parent_model, [sub.as_tool(name="helper", description="Holds.")], store=store)
    first, child = await held.paused_while_held(store, parent.run("go", run_id="p1"), "p1", "h1")
    assert first.status == "paused"
    again, _ = await held.paused_while_held(store, parent.resume("p1"), "p1", "h2")
    assert again.status == "paused"
    moves = [(t.source, t.event, t.target) for t in again.transitions[-2:]]
    assert moves == [
        ("paused", "unpause", "awaiting_approval"), ("awaiting_approval", "pause", "paused"),
    ]  # fmt: skip
    done = await parent.resume("p1")
    assert (done.status, done.output, held.ran) == ("done", "Both held.", ["h1", "h2"])
    assert (await store.load(child)).status == "done"
    store.close()


async def test_aborting_a_parent_resting_with_its_paused_sub_agent_aborts_that_run_too(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    sub = Agent(child_script(), held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    parent = Agent(parent_model, [sub.as_tool(name="helper", description="Finds.")], store=store)
    stopped, child = await held.paused_while_held(store, parent.run("find a", run_id="p1"), "p1")
    assert stopped.status == "paused"
    ended = await parent.abort("p1", "not needed", actor="ops")
    assert ended.status == "aborted"
    assert (await store.load(child)).status == "aborted"  # not left paused with nobody above
    store.close()


TEAM_MODULE = """
from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call

@tool(timeout=60)
async def hold(key: str) -> str:
    \"\"\"Hold a key until released.\"\"\"
    return f"held {key}"

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return f"value of {key}"

script = [call("hold", {"key": "h"}), call("lookup", {"key": "a"}), "Found a."]
sub = Agent(ScriptedModel(script, by_step=True), [hold, lookup])
parent = Agent(
    ScriptedModel([call("helper", {"task": "find a"}), "It is a."], by_step=True),
    [sub.as_tool(name="helper", description="Finds things.")],
)
"""


async def test_the_cli_refuses_the_paused_sub_agents_run_and_resumes_its_parent_to_the_end(
    tmp_path: Path,
) -> None:
    (tmp_path / "team.py").write_text(TEAM_MODULE)
    db = str(tmp_path / "runs.db")
    store, held = SQLiteStore(db), Held()
    sub = Agent(child_script(), held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    helper = sub.as_tool(name="helper", description="Finds things.")
    parent = Agent(parent_model, [helper], store=store)
    stopped, child = await held.paused_while_held(store, parent.run("find a", run_id="p1"), "p1")
    assert stopped.status == "paused"

    refused = loopstate("resume", child, "--agent", "team:sub", "--db", db, cwd=tmp_path)
    assert refused.returncode != 0
    assert f"run {child} is sub-agent 'helper' of run p1: resume that run" in refused.stderr
    assert "Traceback" not in refused.stderr

    done = loopstate("resume", "p1", "--agent", "team:parent", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paused → awaiting_approval" in done.stdout
    assert "answer: It is a." in done.stdout
    calls = [(c.tool, c.status) for c in (await store.load(child)).calls]
    assert calls == [("hold", "succeeded"), ("lookup", "succeeded")]  # each ran once
    assert held.ran == ["h"]
    store.close()


class Report(FlowMachine):
    research = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = research.to(done, cond="always")
    fail = failed.from_(research)
    abort = aborted.from_(research)

    def always(self, data: dict[str, Any]) -> bool:
        return True


async def test_a_flows_agent_phase_run_paused_by_its_id_rests_the_flow_whose_resume_continues_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    child_model = child_script()
    researcher = Agent(child_model, held.tools(), store=store)
    phases = {"research": Phase(agent=researcher, task="research it")}
    flow = Flow(Report, phases, name="report", store=store)
    stopped, child = await held.paused_while_held(store, flow.run("go", run_id="f1"), "f1")
    assert (stopped.status, stopped.phase, stopped.error) == ("paused", "research", None)
    assert child == "f1.research.1"
    assert (await store.load(child)).status == "paused"
    assert (held.ran, len(child_model.requests)) == (["h"], 1)

    with pytest.raises(RunNotResumable, match="resume that run"):
        await researcher.resume(child)  # a phase's run goes on through its flow
    assert (await store.load(child)).status == "paused"  # unchanged

    done = await flow.resume("f1")
    assert (done.status, done.phase) == ("done", "done")
    assert done.data["research"] == "Found a."
    assert held.ran == ["h", "a"]  # the same child run went on: no tool ran twice
    assert len(child_model.requests) == 3
    flow_state = await store.load("f1")
    assert flow_state.flow is not None
    assert flow_state.flow.children == (child,)  # no second run of the phase
    store.close()


async def test_aborting_a_flow_resting_with_its_paused_phase_run_aborts_that_run_too(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    researcher = Agent(child_script(), held.tools(), store=store)
    flow = Flow(Report, {"research": Phase(agent=researcher, task="research it")}, store=store)
    stopped, child = await held.paused_while_held(store, flow.run("go", run_id="f1"), "f1")
    assert stopped.status == "paused"
    ended = await flow.abort("f1", "not needed", actor="ops")
    assert (ended.status, ended.phase) == ("aborted", "aborted")
    assert (await store.load(child)).status == "aborted"  # not left paused with nobody above
    store.close()
