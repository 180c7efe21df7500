"""A pause asked of a run ABOVE a working child run (`pause_run`, `loopstate pause <parent>`): an
agent whose call runs a sub-agent, a flow whose agent phase runs its agent, and a flow whose
phase's agent runs a sub-agent of its own (two levels). The child takes the request at its
next step boundary and rests in `paused`; every run above it rests in `paused` with it, each
taking its own request (none is left unused). The top run's resume (Python, or `loopstate
resume` in a new process) continues the same child runs to the same end, each tool run once.
A parent resumed that waits on its child again is paused again the same way (a tree that
waits for a person is not paused). A pause asked once the child has ended is the lone run's:
the parent stops at its own next boundary. In one process, on a real SQLite file: the
child's tool waits on an event the test sets once the pause is asked (no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from support.cli import loopstate
from test_pause_children import TEAM_MODULE, Held, Report, child_of_run, child_script

from loopstate import Agent, Approve, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.pause import pause_run
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.machines.flows import Flow, Phase

R = TypeVar("R")


async def paused_above(held: Held, store: Store, driven: Awaitable[R], run_id: str, key: str) -> R:
    """Drive `driven` until a child's `hold` of `key` runs, ask `run_id` (a run above that
    child) to pause, release the tool, and return how the drive ended."""
    task = asyncio.ensure_future(driven)
    await held.started[key].wait()
    assert await pause_run(store, run_id, actor="ops")
    held.released[key].set()
    return await task


def last_move(state: RunState) -> tuple[str, str, str, str, str]:
    t = state.transitions[-1]
    return (t.source, t.event, t.target, t.actor or "", t.reason)


async def test_a_pause_of_the_parent_reaches_its_working_sub_agent_and_resume_continues_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    child_model = child_script()
    sub = Agent(child_model, held.tools(), store=store)
    script = [call("helper", {"task": "find a"}), call("hold", {"key": "p"}), "It is a."]
    parent_model = ScriptedModel(script)
    helper = sub.as_tool(name="helper", description="Finds things.")
    parent = Agent(parent_model, [helper, *held.tools()[:1]], store=store)
    stopped = await paused_above(held, store, parent.run("find a", run_id="p1"), "p1", "h")
    assert (stopped.status, stopped.error) == ("paused", None)
    child = await child_of_run(store, "p1")
    assert last_move(await store.load(child)) == (
        "thinking",
        "pause",
        "paused",
        "ops",
        "pause asked of run p1",
    )  # fmt: skip  (its next boundary: before its next model call)
    assert last_move(await store.load("p1")) == (
        "executing_tool", "pause", "paused", "ops", f"sub-agent helper (run {child}) was paused",
    )  # fmt: skip
    assert await store.pause_asked("p1") is None  # taken, not left for a later drive
    assert (held.ran, len(child_model.requests), len(parent_model.requests)) == (["h"], 1, 1)

    # resumed: the same child goes on; a pause asked once it has ended is the parent's own
    again = await paused_above(held, store, parent.resume("p1"), "p1", "p")
    assert (again.status, (await store.load(child)).status) == ("paused", "done")
    assert last_move(await store.load("p1"))[:3] == ("thinking", "pause", "paused")
    assert await store.pause_asked("p1") is None
    done = await parent.resume("p1")
    assert (done.status, done.output) == ("done", "It is a.")
    assert held.ran == ["h", "a", "p"]  # each tool ran once
    assert (len(child_model.requests), len(parent_model.requests)) == (3, 3)
    assert parent_model.requests[1].messages[-1].content == "Found a."
    store.close()


async def test_aborting_a_parent_paused_with_its_sub_agent_aborts_that_run_too(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    sub = Agent(child_script(), held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    parent = Agent(parent_model, [sub.as_tool(name="helper", description="Finds.")], store=store)
    stopped = await paused_above(held, store, parent.run("find a", run_id="p1"), "p1", "h")
    assert stopped.status == "paused"
    child = await child_of_run(store, "p1")
    assert (await store.load(child)).status == "paused"
    ended = await parent.abort("p1", "not needed", actor="ops")
    assert ended.status == "aborted"
    assert (await store.load(child)).status == "aborted"
    assert held.ran == ["h"]
    store.close()


async def test_a_pause_of_the_flow_reaches_its_agent_phases_run_and_resume_continues_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    child_model = child_script()
    researcher = Agent(child_model, held.tools(), store=store)
    flow = Flow(Report, {"research": Phase(agent=researcher, task="research it")}, store=store)
    stopped = await paused_above(held, store, flow.run("go", run_id="f1"), "f1", "h")
    assert (stopped.status, stopped.phase, stopped.error) == ("paused", "research", None)
    assert last_move(await store.load("f1.research.1"))[2:] == (
        "paused", "ops", "pause asked of run f1",
    )  # fmt: skip
    assert await store.pause_asked("f1") is None
    assert (held.ran, len(child_model.requests)) == (["h"], 1)

    done = await flow.resume("f1")
    assert (done.status, done.phase, done.data["research"]) == ("done", "done", "Found a.")
    assert held.ran == ["h", "a"]
    assert len(child_model.requests) == 3
    flow_state = await store.load("f1")
    assert flow_state.flow is not None
    assert flow_state.flow.children == ("f1.research.1",)  # no second run of the phase
    store.close()


async def test_a_pause_of_the_flow_reaches_a_sub_agent_two_levels_down(tmp_path: Path) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    sub_model = child_script()
    sub = Agent(sub_model, held.tools(), store=store)
    lead_model = ScriptedModel([call("helper", {"task": "find a"}), "Lead: a."])
    lead = Agent(lead_model, [sub.as_tool(name="helper", description="Finds.")], store=store)
    flow = Flow(Report, {"research": Phase(agent=lead, task="research it")}, store=store)
    stopped = await paused_above(held, store, flow.run("go", run_id="f1"), "f1", "h")
    assert (stopped.status, stopped.phase) == ("paused", "research")
    phase_run = await child_of_run(store, "f1")
    sub_run = await child_of_run(store, phase_run)
    assert last_move(await store.load(sub_run))[2:] == ("paused", "ops", "pause asked of run f1")
    assert last_move(await store.load(phase_run))[1:4] == ("pause", "paused", "ops")
    assert await store.pause_asked("f1") is None
    assert (held.ran, len(sub_model.requests), len(lead_model.requests)) == (["h"], 1, 1)

    done = await flow.resume("f1")
    assert (done.status, done.data["research"]) == ("done", "Lead: a.")
    assert held.ran == ["h", "a"]
    assert (len(sub_model.requests), len(lead_model.requests)) == (3, 2)
    for run_id in (sub_run, phase_run):
        assert (await store.load(run_id)).status == "done"
    store.close()


async def test_a_parent_paused_from_the_cli_resumes_with_its_sub_agent_in_a_new_process(
    tmp_path: Path,
) -> None:
    (tmp_path / "team.py").write_text(TEAM_MODULE)
    db = str(tmp_path / "runs.db")
    store, held = SQLiteStore(db), Held()
    sub = Agent(child_script(), held.tools(), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    parent = Agent(parent_model, [sub.as_tool(name="helper", description="Finds.")], store=store)
    task = asyncio.ensure_future(parent.run("find a", run_id="p1"))
    await held.started["h"].wait()
    asked = await asyncio.to_thread(loopstate, "pause", "p1", "--db", db, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    held.released["h"].set()
    assert (await task).status == "paused"
    child = await child_of_run(store, "p1")
    assert (await store.load(child)).status == "paused"

    done = loopstate("resume", "p1", "--agent", "team:parent", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paused → awaiting_approval" in done.stdout
    assert "answer: It is a." in done.stdout
    calls = [(c.tool, c.status) for c in (await store.load(child)).calls]
    assert calls == [("hold", "succeeded"), ("lookup", "succeeded")]  # each ran once
    assert held.ran == ["h"]  # the new process ran the rest (its own tools)
    store.close()


async def test_a_parent_waiting_on_its_resumed_sub_agent_is_paused_again_with_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()

    @tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        held.ran.append(f"wire {amount}")
        return f"wired {amount}"

    script = [call("hold", {"key": "h1"}), call("hold", {"key": "h2"}), call("wire", {"amount": 5})]
    sub_model = ScriptedModel([*script, "Both."])
    sub = Agent(sub_model, [*held.tools(), wire], store=store)
    parent_model = ScriptedModel([call("helper", {"task": "hold both"}), "Both held."])
    parent = Agent(parent_model, [sub.as_tool(name="helper", description="Holds.")], store=store)
    first = await paused_above(held, store, parent.run("go", run_id="p1"), "p1", "h1")
    assert first.status == "paused"
    # resumed, the parent waits (awaiting_approval) while its sub-agent works: still pausable
    again = await paused_above(held, store, parent.resume("p1"), "p1", "h2")
    assert again.status == "paused"
    moves = [(t.source, t.event, t.target) for t in again.transitions[-2:]]
    assert moves == [
        ("paused", "unpause", "awaiting_approval"), ("awaiting_approval", "pause", "paused"),
    ]  # fmt: skip
    assert await store.pause_asked("p1") is None
    waiting = await parent.resume("p1")
    assert waiting.status == "awaiting_approval"  # the sub-agent's wire waits for a person
    assert not await pause_run(store, "p1", actor="ops")  # nothing works in the tree
    assert await store.pause_asked("p1") is None
    (wired,) = await parent.pending("p1")
    done = await parent.resume("p1", {wired.call_id: Approve()})
    assert (done.status, done.output) == ("done", "Both held.")
    assert held.ran == ["h1", "h2", "wire 5"]  # each tool ran once
    assert len(sub_model.requests) == 4
    store.close()


async def test_a_flow_waiting_on_its_resumed_phase_run_is_paused_again_with_it(
    tmp_path: Path,
) -> None:
    store, held = SQLiteStore(str(tmp_path / "runs.db")), Held()
    model = ScriptedModel([call("hold", {"key": "h1"}), call("hold", {"key": "h2"}), "Both."])
    researcher = Agent(model, held.tools(), store=store)
    flow = Flow(Report, {"research": Phase(agent=researcher, task="research it")}, store=store)
    first = await paused_above(held, store, flow.run("go", run_id="f1"), "f1", "h1")
    assert first.status == "paused"
    again = await paused_above(held, store, flow.resume("f1"), "f1", "h2")
    assert (again.status, again.phase) == ("paused", "research")
    assert (await store.load("f1.research.1")).status == "paused"
    assert await store.pause_asked("f1") is None
    done = await flow.resume("f1")
    assert (done.status, done.data["research"], held.ran) == ("done", "Both.", ["h1", "h2"])
    assert len(model.requests) == 3
    store.close()
