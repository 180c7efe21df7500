"""The agents and flows the Temporal tests, their worker processes and the recorded histories
serve (sub-agents and agent phases run as child workflows).

Models are scripted by step (a worker started after another died continues the script where
the run is) and their final answers quote the tool results, so a test sees what the model saw.
Tools write to files under WORKDIR, so a test counts effects across processes.
"""

from __future__ import annotations

from pathlib import Path

from flow_child import happy_script
from statemachine import State
from support.waiting import blocked_until_exists

from loopstate import Agent, MemoryStore, ModelRequest, ScriptedModel, Tool, tool
from loopstate.engine.models.scripted import ScriptItem, call, calls
from loopstate.machines.coaching import coaching_flow
from loopstate.machines.flows import Flow, FlowData, FlowMachine, Phase
from loopstate.tools.human import ask_person


def _answer(request: ModelRequest) -> ScriptItem:
    """A final answer quoting every tool result of the last batch."""
    results = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results.append(str(message.content))
    return "final: " + " | ".join(reversed(results))


def _looping(steps: int):  # type: ignore[no-untyped-def]
    def turn(request: ModelRequest) -> ScriptItem:
        if request.step > steps:
            return _answer(request)
        return call("lookup", {"key": f"k{request.step}"}, id=f"look_{request.step}")

    return turn


class Pipeline(FlowMachine):
    """One agent phase: its agent runs as a child workflow of the flow's."""

    draft = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = draft.to(done, cond="drafted")
    fail = failed.from_(draft)
    abort = aborted.from_(draft)

    def drafted(self, data: FlowData) -> bool:
        return "draft" in data


class Desk(FlowMachine):
    """One model phase whose tool is a sub-agent."""

    work = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = work.to(done)
    fail = failed.from_(work)
    abort = aborted.from_(work)


def agents(workdir: Path) -> dict[str, Agent | Flow]:
    """The served agents and flows, their tools writing under `workdir`."""

    @tool(needs_approval=True)
    def write_note(path: str, text: str) -> str:
        """Append a line to a note (not idempotent: each run appends)."""
        with (workdir / path).open("a") as f:
            f.write(text + "\n")
        return f"appended {text!r} to {path}"

    @tool
    def lookup(key: str) -> str:
        """Look a key up (read-only)."""
        return f"value of {key}"

    @tool(timeout=60)
    def append_then_wait(path: str, text: str) -> str:
        """Append a line, then wait until WORKDIR/release exists (a test kills the worker)."""
        with (workdir / path).open("a") as f:
            f.write(text + "\n")
        blocked_until_exists(workdir / "release")
        return "appended and released"

    def model(*script: object) -> ScriptedModel:
        return ScriptedModel(list(script), by_step=True)  # type: ignore[arg-type]

    tools = [write_note, lookup, append_then_wait]
    store = MemoryStore()
    one_note = call("write_note", {"path": "notes.txt", "text": "hello"}, id="note_1")
    batch = calls(
        call("write_note", {"path": "a.txt", "text": "A"}, id="note_a"),
        call("write_note", {"path": "b.txt", "text": "B"}, id="note_b"),
        call("lookup", {"key": "x"}, id="look_x"),
    )
    second_note = call("write_note", {"path": "notes.txt", "text": "again"}, id="note_2")
    ask = call("ask_person", {"question": "ship it?"}, id="ask_1")
    slow = call("append_then_wait", {"path": "effects.txt", "text": "once"}, id="slow_1")

    def sub(agent: Agent, name: str) -> Agent:
        """A parent whose model delegates one task to `agent` (as tool `name`), then answers."""
        delegate = call(name, {"task": "note hello"}, id=f"{name}_1")
        tool = agent.as_tool(name=name, description="Delegate a task")
        return Agent(model(delegate, _answer), [tool], store=store)

    researcher = Agent(model(one_note, _answer), tools, store=store)
    slow_child = Agent(model(slow, _answer), tools, store=store)
    coach = model(*happy_script())  # one model for every phase, turn by step
    return {
        "boss": sub(researcher, "research"),
        "chief": sub(sub(researcher, "research"), "team"),  # a sub-agent's sub-agent
        "delegator": sub(slow_child, "slow_work"),
        "coaching": coaching_flow(
            models=dict.fromkeys(("default", "analyst", "plan"), coach), store=store
        ),
        "desk": Flow(
            Desk,
            {
                "work": Phase(
                    tools=[researcher.as_tool(name="research", description="Delegate")],
                    model=model(call("research", {"task": "x"}, id="research_1"), _answer),
                )
            },
            name="desk",
            store=store,
        ),
        "noting": noting(tools, model(one_note, _answer)),
        "pipeline": Flow(
            Pipeline,
            {"draft": Phase(agent=researcher, task="note {topic}")},
            name="pipeline",
            store=store,
        ),
        "writer": Agent(model(one_note, _answer), tools, store=store, instructions="Be brief."),
        "batch": Agent(model(batch, _answer), tools, store=store),
        "twice": Agent(model(one_note, second_note, _answer), tools, store=store),
        "looper": Agent(model(*[_looping(5)] * 6), tools, store=store, max_steps=10),
        "slow": Agent(model(slow, _answer), tools, store=store),
        "asker": Agent(model(ask, _answer), [ask_person], store=store),  # an external tool
    }


def noting(tools: list[Tool], model: ScriptedModel) -> Flow:
    """A flow of one model phase that writes a note (gated, if `write_note` is)."""
    return Flow(Desk, {"work": Phase(tools=tools, model=model)}, name="noting", store=MemoryStore())


def writer() -> Agent:
    """The `writer` agent, for `loopstate temporal replay --agent temporal_agents:writer`."""
    return agents(Path("."))["writer"]


def writer_without_write_note() -> Agent:
    """`writer` once its gated tool was removed: its recorded runs no longer replay."""
    agent = writer()
    return agent.clone(tools=[t for t in agent.tools if t.name != "write_note"])
