"""Events, hooks and log lines of a run."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from structlog.testing import capture_logs
from support import make_tools

from loopstate import Agent, Approve, CallRecord, Event, Hooks, ScriptedModel, compose, merge
from loopstate.engine.models.scripted import call, calls

SCRIPT = [
    calls(call("read_file", {"path": "a"}), call("write_file", {"path": "b", "content": "x"})),
    "done",
]

# The whole event sequence of a run with one mixed batch: a snapshot of the contract.
EXPECTED_KINDS = [
    "run_started",
    "transition",  # idle → thinking
    "model_request",
    "model_response",
    "transition",  # thinking → awaiting_approval
    "approval_requested",
    "tool_approval",
    "transition",  # awaiting_approval → executing_tool
    "tool_started",
    "tool_started",
    "tool_finished",
    "tool_finished",
    "transition",  # executing_tool → thinking
    "model_request",
    "model_response",
    "transition",  # thinking → done
    "run_finished",
]


async def approve_all(requests):
    return {r.call_id: Approve() for r in requests}


async def test_the_event_kinds_of_a_run_match_the_snapshot() -> None:
    _, tools = make_tools()
    result = await Agent(ScriptedModel(SCRIPT), tools, approver=approve_all).run("go")
    assert [e.kind for e in result.events] == EXPECTED_KINDS
    transitions = [(e.source, e.target) for e in result.events if e.kind == "transition"]
    assert transitions == [(t.source, t.target) for t in result.transitions]


async def test_each_event_is_one_log_line_with_the_run_id_bound() -> None:
    _, tools = make_tools()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(0))
    try:
        with capture_logs() as lines:
            result = await Agent(ScriptedModel(SCRIPT), tools, approver=approve_all).run("go")
    finally:
        structlog.reset_defaults()
    ours = [line for line in lines if line.get("run_id") == result.run_id]
    assert [line["event"] for line in ours] == EXPECTED_KINDS
    transition = next(line for line in ours if line["event"] == "transition")
    assert (transition["source"], transition["target"], transition["trigger"]) == (
        "idle",
        "thinking",
        "start",
    )


async def test_an_unconfigured_structlog_prints_nothing_to_stdout(capsys) -> None:
    structlog.reset_defaults()
    await Agent(ScriptedModel(["hi"])).run("go")
    assert capsys.readouterr().out == ""


class Recorder(Hooks):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def on_run_start(self, run) -> None:
        self.log.append(f"{self.name}:start")

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        self.log.append(f"{self.name}:after_tool:{call.tool}")
        return f"{result} +{self.name}"

    async def on_event(self, event: Event) -> None:
        if event.kind == "run_finished":
            self.log.append(f"{self.name}:finished")


async def test_composed_hooks_run_in_order_and_after_tool_is_a_pipeline() -> None:
    _, tools = make_tools()
    log: list[str] = []
    model = ScriptedModel([call("read_file", {"path": "a"}), "done"])
    hooks = compose(Recorder("a", log), merge(Recorder("b", log), Recorder("c", log)))
    await Agent(model, tools, hooks=hooks).run("go")
    assert log == [
        "a:start", "b:start", "c:start",
        "a:after_tool:read_file", "b:after_tool:read_file", "c:after_tool:read_file",
        "a:finished", "b:finished", "c:finished",
    ]  # fmt: skip
    assert model.requests[1].messages[-1].content == "contents of a +a +b +c"


async def test_a_hook_can_redact_a_result_but_cannot_decide_an_approval() -> None:
    counted, tools = make_tools()

    class Meddler(Hooks):
        async def on_approval_requested(self, requests) -> None:
            # Hooks get frozen data: there is nothing here to approve with.
            with pytest.raises(Exception, match="frozen"):
                requests[0].reason = "approved by hook"

        async def before_tool(self, call: CallRecord) -> None:
            with pytest.raises(Exception, match="frozen"):
                call.status = "approved"

    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "done"])
    result = await Agent(model, tools, hooks=Meddler()).run("go")
    assert result.status == "awaiting_approval"
    assert counted["write_file"] == 0


async def test_cancelling_a_running_run_interrupts_it_and_leaves_it_to_resume() -> None:
    from loopstate import MemoryStore, tool

    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Blocks."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    store = MemoryStore()
    agent = Agent(
        ScriptedModel([call("wait_forever")]), [wait_forever], store=store, ids=lambda: "c1"
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stored = await store.load("c1")
    assert (stored.state, stored.stop_reason) == ("executing_tool", None)  # not aborted
    assert stored.transitions[-1].target == "executing_tool"


class Everything(Hooks):
    """Records every lifecycle point, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_run_start(self, run) -> None:
        self.seen.append("run_start")

    async def on_run_end(self, run) -> None:
        self.seen.append(f"run_end:{run.status}")

    async def before_model(self, request) -> None:
        self.seen.append(f"before_model:{request.step}")

    async def after_model(self, request, response) -> None:
        self.seen.append(f"after_model:{request.step}")

    async def before_tool(self, call: CallRecord) -> None:
        self.seen.append(f"before_tool:{call.tool}")

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        self.seen.append(f"after_tool:{call.tool}")
        return None

    async def on_approval_requested(self, requests) -> None:
        self.seen.append(f"approval_requested:{','.join(r.tool for r in requests)}")

    async def on_approval_decided(self, call: CallRecord) -> None:
        self.seen.append(f"approval_decided:{call.tool}:{call.decision.kind}")

    async def on_transition(self, transition) -> None:
        self.seen.append(f"transition:{transition.target}")


async def test_every_lifecycle_hook_fires_in_order() -> None:
    _, tools = make_tools()
    hooks = Everything()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "done"])
    await Agent(model, tools, approver=approve_all, hooks=hooks).run("go")
    assert hooks.seen == [
        "run_start", "transition:thinking",
        "before_model:1", "after_model:1", "transition:awaiting_approval",
        "approval_requested:write_file", "approval_decided:write_file:approve",
        "transition:executing_tool",
        "before_tool:write_file", "after_tool:write_file", "transition:thinking",
        "before_model:2", "after_model:2", "transition:done",
        "run_end:done",
    ]  # fmt: skip


async def test_a_broken_approval_predicate_asks_instead_of_letting_the_call_through() -> None:
    from loopstate import tool

    ran: list[int] = []

    @tool(needs_approval=lambda args: 1 / 0)
    def risky(n: int) -> str:
        """Risky."""
        ran.append(n)
        return "ran"

    result = await Agent(ScriptedModel([call("risky", {"n": 1})]), [risky]).run("go")
    assert result.status == "awaiting_approval"
    assert "approval check raised ZeroDivisionError" in result.pending[0].reason
    assert ran == []
