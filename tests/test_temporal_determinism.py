"""Determinism as a tested property: recorded histories of representative runs replay against
the current code, and the machine and its guards read no clock and make no id."""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporal_agents import agents
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from loopstate.engine.diagram import graph_of
from loopstate.machines.agent.loop import AgentLoop, agent_loop
from loopstate.temporal import AgentWorkflow, FlowWorkflow, data_converter
from loopstate.temporal import ports as temporal_ports
from loopstate.temporal.catalog import serve
from loopstate.temporal.worker import sandbox_runner

HISTORIES = Path(__file__).parent / "temporal_histories"
RECORDED = sorted(p.stem for p in HISTORIES.glob("*.json"))


def _histories(name: str) -> list[WorkflowHistory]:
    recorded = json.loads((HISTORIES / f"{name}.json").read_text())
    return [WorkflowHistory.from_json(name, h) for h in recorded]


def _replayer() -> Replayer:
    return Replayer(
        workflows=[AgentWorkflow, FlowWorkflow],
        data_converter=data_converter(),
        workflow_runner=sandbox_runner(),
    )


def test_the_representative_runs_are_recorded() -> None:
    assert RECORDED == [
        "abort",
        "approve",
        "coaching",
        "continue_as_new",
        "crash_mid_approval",
        "crash_mid_tool",
        "deny",
        "edit",
        "flow_agent_phase",
        "flow_agent_phase__child",
        "partial_batch",
        "sub_agent",
        "sub_agent__child",
    ]
    assert len(_histories("continue_as_new")) == 3


@pytest.mark.parametrize("name", RECORDED)
async def test_a_recorded_history_replays_against_the_current_code(
    name: str, tmp_path: Path
) -> None:
    serve(agents(tmp_path))
    for history in _histories(name):
        result = await _replayer().replay_workflow(history)
        assert result.replay_failure is None


async def test_replay_fails_when_the_workflow_changes_its_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(agents(tmp_path))
    monkeypatch.setattr(temporal_ports, "TOOL_ACTIVITY", "loopstate.renamed_tool")
    with pytest.raises(NondeterminismError):
        await _replayer().replay_workflow(_histories("approve")[0])


def _forbidden(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the machine read the clock or made an id")


# Every transition of the loop, with the facts its guards read.
TRANSITIONS: list[tuple[str, str, dict[str, Any], str]] = [
    ("idle", "start", {}, "thinking"),
    ("thinking", "replied", {"calls": 0, "gated": 0}, "done"),
    ("thinking", "replied", {"calls": 2, "gated": 1}, "awaiting_approval"),
    ("thinking", "replied", {"calls": 2, "gated": 0}, "executing_tool"),
    ("awaiting_approval", "decided", {}, "executing_tool"),
    ("executing_tool", "tools_done", {"stop": "max_steps"}, "done"),
    ("executing_tool", "tools_done", {"stop": None}, "thinking"),
    ("executing_tool", "reapprove", {}, "awaiting_approval"),
    ("thinking", "model_error", {}, "model_failed"),
    ("model_failed", "retry", {}, "thinking"),
    ("done", "user_message", {}, "thinking"),
    ("awaiting_approval", "expired", {}, "executing_tool"),
    ("thinking", "over_budget", {}, "budget_exceeded"),
    ("executing_tool", "over_budget", {}, "budget_exceeded"),
    ("awaiting_approval", "over_budget", {}, "budget_exceeded"),
    ("budget_exceeded", "budget_raised", {"batch": True}, "executing_tool"),
    ("budget_exceeded", "budget_raised", {"batch": False, "child": True}, "awaiting_approval"),
    ("budget_exceeded", "budget_raised", {"batch": False}, "thinking"),
    ("thinking", "pause", {}, "paused"),
    ("executing_tool", "pause", {}, "paused"),
    ("awaiting_approval", "pause", {}, "paused"),
    ("paused", "unpause", {"batch": True}, "executing_tool"),
    ("paused", "unpause", {"batch": False, "child": True}, "awaiting_approval"),
    ("paused", "unpause", {"batch": False}, "thinking"),
    *[(s, "abort", {}, "aborted") for s in ("idle", "thinking", "awaiting_approval")],
    *[(s, "fail", {}, "failed") for s in ("idle", "thinking", "executing_tool")],
]


def test_the_transition_table_covers_every_transition_of_the_loop() -> None:
    declared = {(e.source, e.target, e.event) for e in graph_of(AgentLoop).edges}
    covered = {(source, target, event) for source, event, _, target in TRANSITIONS}
    # abort and fail leave every state alike: three of each stand for the others
    assert {d for d in declared if d[2] not in ("abort", "fail")} <= covered


@pytest.mark.parametrize(("source", "event", "facts", "target"), TRANSITIONS)
def test_the_machine_and_its_guards_read_no_clock_and_make_no_id(
    source: str, event: str, facts: dict[str, Any], target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = agent_loop(source)
    for module, name in [
        (time, "time"),
        (time, "time_ns"),
        (time, "monotonic"),
        (time, "monotonic_ns"),
        (time, "perf_counter"),
        (uuid, "uuid1"),
        (uuid, "uuid4"),
        (random, "random"),
        (random, "getrandbits"),
    ]:
        monkeypatch.setattr(module, name, _forbidden)
    getattr(machine, event)(**facts)
    assert machine.current_state_value == target
