"""The agents `test_temporal_limits`, `test_temporal_child_budget`, `test_temporal_flow_budget`
and `test_temporal_pause_children` serve: a run to pause mid-loop (or a tree, at its top),
approval deadlines, budgets (a sub-agent's tree's and a flow's agent phase's too), and rules
that forbid and gate; and the helpers they use (`served`, `state_is`, `replays`).

Models are scripted by step and their final answers quote the last batch's tool results, so
a test sees what the model saw. Tools write under WORKDIR, so a test counts their effects.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from support.waiting import blocked_until_exists, until
from temporal_agents import Desk, Pipeline
from temporal_support import connect
from temporalio import workflow
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

from loopstate import (
    Agent,
    Budget,
    Deny,
    Escalate,
    MemoryStore,
    ModelRequest,
    Rule,
    ScriptedModel,
    Tool,
    tool,
)
from loopstate.engine.models.scripted import ScriptItem, call, calls
from loopstate.engine.state import RunState
from loopstate.machines.flows import Flow, Phase
from loopstate.temporal import (
    AgentWorkflow,
    FlowWorkflow,
    TemporalRuns,
    agent_worker,
    data_converter,
)
from loopstate.temporal.activities import complete_model, run_tool
from loopstate.temporal.catalog import serve
from loopstate.temporal.worker import sandbox_runner

NO_ETC = Rule(name="no-etc", tools=["write_note"], arguments={"path": "/etc/*"}, forbid=True,
              reason="system files are off limits")  # fmt: skip
ASK_LOOKUP = Rule(name="ask-lookup", tools=["lookup"], decision="ask")
DEADLINE_S = 2.0


def answer(request: ModelRequest) -> ScriptItem:
    """A final answer quoting every tool result of the last batch."""
    results = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results.append(str(message.content))
    return "final: " + " | ".join(reversed(results))


def agents(workdir: Path) -> dict[str, Agent | Flow]:
    """The served agents, their tools writing under `workdir`."""

    @tool(needs_approval=True)
    def write_note(path: str, text: str) -> str:
        """Append a line to a note."""
        with (workdir / Path(path).name).open("a") as f:
            f.write(text + "\n")
        return f"appended {text!r} to {path}"

    @tool(needs_approval=True, decide_within=DEADLINE_S, on_expiry=Deny("no answer in time"))
    def publish(text: str) -> str:
        """Publish a text (a decision is due within two seconds)."""
        with (workdir / "published.txt").open("a") as f:
            f.write(text + "\n")
        return f"published {text!r}"

    @tool(needs_approval=True, decide_within=1, on_expiry=Escalate(to="lead"))
    def announce(text: str) -> str:
        """Publish a text (handed to the lead if no one decides within a second)."""
        return f"published {text!r}"

    @tool
    def lookup(key: str) -> str:
        """Look a key up (read-only); each call counted in WORKDIR/lookups.txt."""
        with (workdir / "lookups.txt").open("a") as f:
            f.write(key + "\n")
        return f"value of {key}"

    @tool(timeout=60)
    def hold(key: str) -> str:
        """Write WORKDIR/held, then wait until WORKDIR/release exists (a test pauses the run
        meanwhile)."""
        (workdir / "held").write_text(key)
        blocked_until_exists(workdir / "release")
        return f"held {key}"

    def model(*script: object) -> ScriptedModel:
        return ScriptedModel(list(script), by_step=True)  # type: ignore[arg-type]

    tools = [write_note, publish, announce, lookup, hold]

    def flow(name: str, phase_model: ScriptedModel) -> Flow:
        """A flow of one model phase with these tools."""
        return Flow(Desk, {"work": Phase(tools=tools, model=phase_model)}, name=name, store=store)

    store = MemoryStore()
    look = [call("lookup", {"key": f"k{n}"}, id=f"look_{n}") for n in (1, 2, 3, 4)]
    held = call("hold", {"key": "h"}, id="hold_1")
    publishing = call("publish", {"text": "hi"}, id="pub_1")
    forbidden = calls(
        call("write_note", {"path": "/etc/passwd", "text": "x"}, id="etc"),
        call("write_note", {"path": "notes.txt", "text": "y"}, id="notes"),
    )
    researcher = Agent(model(look[0], answer), tools, store=store)
    return {
        "pausing": Agent(model(look[0], held, look[2], answer), tools, store=store),
        "deadline": Agent(
            model(call("publish", {"text": "hi"}, id="pub_1"), answer), tools, store=store
        ),
        "escalating": Agent(
            model(call("announce", {"text": "hi"}, id="ann_1"), answer), tools, store=store
        ),
        "budgeted": Agent(model(*look, answer), tools, store=store, budget=Budget(tool_calls=2)),
        "publishing": flow("publishing", model(publishing, answer)),  # due within two seconds
        "pausing_flow": flow("pausing_flow", model(look[0], held, look[2], answer)),
        "treed": Agent(  # its sub-agent's two model calls count toward its budget
            model(call("research", {"task": "look"}, id="research_1"), answer),
            [researcher.as_tool(name="research", description="Delegate a task")],
            store=store,
            budget=Budget(model_calls=3),
        ),
        "treed_tight": Agent(  # its sub-agent's second model call would pass its budget
            model(call("research", {"task": "look"}, id="research_1"), answer),
            [researcher.as_tool(name="research", description="Delegate a task")],
            store=store,
            budget=Budget(model_calls=2),
        ),
        "phased_tight": Flow(  # its agent phase's second model call would pass its budget
            Pipeline,
            {"draft": Phase(agent=researcher, task="look {topic}")},
            name="phased_tight",
            store=store,
            budget=Budget(model_calls=1),
        ),
        "phased_treed": Flow(  # its agent phase's sub-agent's second call would pass it
            Pipeline,
            {"draft": Phase(agent=delegating(researcher, store), task="look {topic}")},
            name="phased_treed",
            store=store,
            budget=Budget(model_calls=2),
        ),
        **pausing_trees(workdir, lookup, store),
        **due_in_hours(write_note, store),
        "ruled": Agent(
            model(forbidden, look[0], answer), tools, store=store, rules=[NO_ETC, ASK_LOOKUP]
        ),
    }


def delegating(researcher: Agent, store: MemoryStore) -> Agent:
    """An agent that delegates one task to `researcher` (tool `research`), then answers."""
    delegate = call("research", {"task": "look"}, id="research_1")
    tool = researcher.as_tool(name="research", description="Delegate a task")
    return Agent(ScriptedModel([delegate, answer], by_step=True), [tool], store=store)


def pausing_trees(workdir: Path, lookup: Tool, store: MemoryStore) -> dict[str, Agent | Flow]:
    """Trees whose child (a sub-agent, a flow's agent phase's run, or that run's sub-agent)
    waits twice (`wait_for` a, then b) while a test pauses the run at the top
    (`test_temporal_pause_children`)."""

    @tool(timeout=60)
    def wait_for(key: str) -> str:
        """Write WORKDIR/held-KEY, then wait until WORKDIR/release-KEY exists."""
        (workdir / f"held-{key}").touch()
        blocked_until_exists(workdir / f"release-{key}")
        return f"waited for {key}"

    waits = [call("wait_for", {"key": k}, id=f"wait_{k}") for k in ("a", "b")]
    script = [call("lookup", {"key": "k1"}, id="look_1"), *waits]
    looked = call("lookup", {"key": "k3"}, id="look_3")
    holder = Agent(
        ScriptedModel([*script, looked, answer], by_step=True), [lookup, wait_for], store=store
    )
    return {
        "pausing_treed": Agent(
            ScriptedModel(
                [call("research", {"task": "look"}, id="research_1"), answer], by_step=True
            ),
            [holder.as_tool(name="research", description="Delegate a task")],
            store=store,
        ),
        "pausing_phased": Flow(
            Pipeline,
            {"draft": Phase(agent=holder, task="look {topic}")},
            name="pausing_phased",
            store=store,
        ),
        "pausing_phased_treed": Flow(
            Pipeline,
            {"draft": Phase(agent=delegating(holder, store), task="look {topic}")},
            name="pausing_phased_treed",
            store=store,
        ),
    }


def due_in_hours(write_note: Tool, store: MemoryStore) -> dict[str, Agent | Flow]:
    """Agents whose one call waits for a decision due in an hour, in two hours, or never."""

    @tool(needs_approval=True, decide_within=3600)
    def archive(text: str) -> str:
        """Archive a text (a decision is due within an hour)."""
        return f"archived {text!r}"

    @tool(needs_approval=True, decide_within=7200)
    def shelve(text: str) -> str:
        """Shelve a text (a decision is due within two hours)."""
        return f"shelved {text!r}"

    def agent(item: ScriptItem, tool: Tool) -> Agent:
        return Agent(ScriptedModel([item], by_step=True), [tool], store=store)

    return {
        "undue": agent(call("write_note", {"path": "n", "text": "x"}, id="w"), write_note),
        "due_later": agent(call("shelve", {"text": "s"}, id="s"), shelve),
        "due_soon": agent(call("archive", {"text": "a\x1b[31m"}, id="a"), archive),  # an escape
    }


@asynccontextmanager
async def served(
    address: str, workdir: Path, queue: str | None = None
) -> AsyncIterator[TemporalRuns]:
    """A client, and a worker in this process serving `temporal_limits_agents` on `queue`."""
    client = await connect(address)
    runs = TemporalRuns(client, task_queue=queue or f"q-{uuid.uuid4().hex[:8]}")
    async with agent_worker(client, agents(workdir), task_queue=runs.task_queue):
        yield runs


@asynccontextmanager
async def served_before_patches(address: str, workdir: Path) -> AsyncIterator[TemporalRuns]:
    """As `served`, by a worker from before the patches: `workflow.patched` answers False, as
    for a history without a patch's marker (the unsandboxed runner sees the patched function)."""
    client = await connect(address)
    serve(agents(workdir))
    runs = TemporalRuns(client, task_queue=f"q-{uuid.uuid4().hex[:8]}")
    before = Worker(
        client,
        task_queue=runs.task_queue,
        workflows=[AgentWorkflow, FlowWorkflow],
        activities=[complete_model, run_tool],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workflow, "patched", lambda _id: False)
        async with before:
            yield runs


async def state_is(runs: TemporalRuns, run_id: str, name: str) -> RunState:
    async def at() -> RunState | None:
        """the run in the awaited state"""
        state = await runs.state(run_id)
        return state if state.state == name else None

    return await until(at, every=0.05)


async def replays(runs: TemporalRuns, run_id: str) -> None:
    """The run's history replays against the workflow code: it made the same commands."""
    history = await runs.client.get_workflow_handle(run_id).fetch_history()
    workflows = [AgentWorkflow, FlowWorkflow]
    runner = sandbox_runner()
    replayer = Replayer(
        workflows=workflows, data_converter=data_converter(), workflow_runner=runner
    )
    assert (await replayer.replay_workflow(history)).replay_failure is None
