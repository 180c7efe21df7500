"""Replaying a recorded Temporal history against the current agent or flow: `replay_history`,
and `loopstate temporal replay HISTORY.json --agent MODULE:ATTR`.

A history is what `temporal workflow show --output json` writes (one workflow run) or a JSON
list of them (a run continued as new). On non-determinism the answer says first, in the
agent's terms, what differs between the recorded run and the agent now — tools added,
removed, reordered, gated or no longer gated, the machine's version — then Temporal's own
message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Replayer

from loopstate.engine.errors import DefinitionError
from loopstate.machines.agent.agent import Agent
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.flows.flow import Flow
from loopstate.temporal.catalog import resolve, serve
from loopstate.temporal.data import (
    FLOW_WORKFLOW,
    MODEL_ACTIVITY,
    TOOL_ACTIVITY,
    ModelCall,
    StartFlow,
    StartRun,
    ToolCallRun,
)
from loopstate.temporal.flow_workflow import FlowWorkflow
from loopstate.temporal.worker import data_converter, sandbox_runner
from loopstate.temporal.workflow import AgentWorkflow


@dataclass(frozen=True)
class ReplayReport:
    """How a history replayed: `ok`, else `error` (one paragraph: what changed, in the
    agent's terms, then Temporal's message)."""

    histories: int
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What a history says of the agent that ran it."""

    agent: str
    tools: tuple[str, ...]
    gated: frozenset[str]
    ungated: frozenset[str]
    machine_version: int | None


def load_histories(path: str | Path) -> list[WorkflowHistory]:
    """The workflow histories in a JSON file: one history (`{"events": [...]}`) or a list."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DefinitionError(f"cannot read history {path}: {exc}") from None
    items = data if isinstance(data, list) else [data]
    if not items or not all(isinstance(h, dict) and "events" in h for h in items):
        raise DefinitionError(
            f'{path} is not a workflow history: expected {{"events": [...]}} or a list of them '
            "(temporal workflow show --output json)"
        )
    return [WorkflowHistory.from_json(Path(path).stem, h) for h in items]


async def replay_history(path: str | Path, agent: Agent | Flow) -> ReplayReport:
    """Replay the history (or histories) at `path` against `agent` (an agent or a flow),
    served under the name the run was started with; a child run's history (a sub-agent's, an
    agent phase's) against the top agent or flow it was started under."""
    histories = load_histories(path)
    recorded = read_recorded(histories)
    serve({recorded.agent.split("/")[0]: agent})
    replayer = Replayer(
        workflows=[AgentWorkflow, FlowWorkflow],
        data_converter=data_converter(),
        workflow_runner=sandbox_runner(),
        runtime=Runtime(telemetry=TelemetryConfig(logging=None)),  # the report says it all
    )
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            now = resolve(recorded.agent)
            changes = changed(recorded, now) if isinstance(now, Agent) else _flow_changed(recorded)
            said = _temporal_message(result.replay_failure)
            return ReplayReport(len(histories), False, f"{changes} Temporal says: {said}")
    return ReplayReport(len(histories), True)


def _temporal_message(failure: Exception) -> str:
    """Temporal's own words: the core's `message: "..."` when it wraps one."""
    text = str(failure)
    found = re.search(r'message: "((?:[^"\\]|\\.)*)"', text)
    return found[1] if found else f"{type(failure).__name__}: {text}"


def read_recorded(histories: list[WorkflowHistory]) -> Recorded:
    """The agent's name, tools (in order), gated and ungated calls' tools, and machine version
    as the recorded run saw them."""
    converter = data_converter().payload_converter
    agent, tools, version = "", (), None
    gated: set[str] = set()
    ungated: set[str] = set()
    for history in histories:
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                attributes = event.workflow_execution_started_event_attributes
                flow = attributes.workflow_type.name == FLOW_WORKFLOW
                start = _decode(converter, event, StartFlow if flow else StartRun)
                agent = agent or (start.flow if flow else start.agent)
                if start.state is not None:
                    version = start.state.machine_version
            scheduled = _scheduled(event)
            if scheduled == MODEL_ACTIVITY and not tools:
                call = _decode(converter, event, ModelCall)
                tools = tuple(t.name for t in call.request.tools)
            elif scheduled == TOOL_ACTIVITY:
                record = _decode(converter, event, ToolCallRun).record
                auto = record.decided_by in (None, "auto_approve")
                (ungated if auto else gated).add(record.tool)
    if not agent:
        raise DefinitionError("the history has no workflow start: is it a loopstate run's?")
    return Recorded(agent, tools, frozenset(gated), frozenset(ungated), version)


def _flow_changed(recorded: Recorded) -> str:
    return (
        f"flow {recorded.agent!r} does not replay its recorded run: its phases, gates or "
        "models, or the workflow code, changed since it ran."
    )


def changed(recorded: Recorded, agent: Agent) -> str:
    """One paragraph: how `agent` differs from the agent that made the recorded run."""
    now = tuple(t.name for t in agent.tools)
    tools = {t.name: t for t in agent.tools}
    said: list[str] = []
    removed = [t for t in recorded.tools if t not in now]
    added = [t for t in now if t not in recorded.tools]
    if removed:
        said.append("removed " + ", ".join(_named(t, recorded) for t in removed))
    if added:
        said.append("added " + ", ".join(added))
    common = [t for t in now if t in recorded.tools]
    if common != [t for t in recorded.tools if t in now]:
        said.append(f"reordered the tools ({', '.join(recorded.tools)} → {', '.join(now)})")
    for name in sorted(recorded.ungated & tools.keys()):
        if tools[name].needs_approval is True:
            said.append(f"gated {name} (it ran without a decision then)")
    for name in sorted(recorded.gated & tools.keys()):
        if tools[name].needs_approval is False:
            said.append(f"ungated {name} (it waited for a decision then)")
    version = recorded.machine_version
    if version is not None and version != AgentLoop.machine_version:
        said.append(f"changed the machine (version {version} → {AgentLoop.machine_version})")
    head = f"agent {recorded.agent!r} does not replay its recorded run: "
    if not said:
        return head + "its tools and machine look unchanged, so the workflow code changed."
    return head + "since it ran, the agent " + "; ".join(said) + "."


def _named(tool: str, recorded: Recorded) -> str:
    return f"{tool} (gated)" if tool in recorded.gated else tool


def _scheduled(event: HistoryEvent) -> str | None:
    if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return None
    return str(event.activity_task_scheduled_event_attributes.activity_type.name)


def _decode(converter: Any, event: HistoryEvent, kind: type[Any]) -> Any:
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        payloads = event.workflow_execution_started_event_attributes.input.payloads
    else:
        payloads = event.activity_task_scheduled_event_attributes.input.payloads
    return converter.from_payloads(list(payloads), [kind])[0]
