"""loopstate: an explicit state-machine orchestration engine for LLM agents.

A declarative state machine owns the loop (thinking → awaiting_approval → executing_tool →
thinking); the model is called one step at a time and never runs tools itself.
"""

import importlib
from typing import TYPE_CHECKING, Any

from loopstate.engine.approval import Abort, ApprovalRequest, Approve, Decision, Deny, Edit, Gate
from loopstate.engine.budget import Budget
from loopstate.engine.deadlines import Escalate
from loopstate.engine.definition import Definition
from loopstate.engine.errors import (
    CassetteError,
    DecisionError,
    DefinitionError,
    ForkRefused,
    IncompatibleRun,
    LoopstateError,
    ModelError,
    RunBusy,
    RunDamaged,
    RunInterrupted,
    RunNotFound,
    RunNotResumable,
    ScriptExhausted,
    StoreError,
    ToolDefinitionWarning,
    UnexpectedRequest,
)
from loopstate.engine.events import Event
from loopstate.engine.failure import RunFailure
from loopstate.engine.history import TokenBudget
from loopstate.engine.hooks import Hooks, compose, merge
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from loopstate.engine.migration import Migration
from loopstate.engine.model import Model, ModelRequest, ModelResponse, ToolDefinition, Usage
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.models.retry import RetryingModel, RetryPolicy
from loopstate.engine.models.scripted import ScriptedModel, Turn
from loopstate.engine.options import StopCondition
from loopstate.engine.policies import ApprovalPolicy, Rule, chain_approvers
from loopstate.engine.result import RunResult
from loopstate.engine.state import CallRecord, ParentLink, RunState, Transition
from loopstate.engine.store import RunSummary, Store
from loopstate.engine.stores.memory import MemoryStore
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.tool import Tool, ToolContext
from loopstate.engine.tree import RunTree, UsageReport, pending_tree, run_tree, usage_tree
from loopstate.machines.agent import Agent
from loopstate.machines.agent.loop import AgentLoop

# Imported now, not on first use: `loopstate.replay` is also this submodule's name, and once the
# submodule is imported (by the pytest plugin, the CLI, a test) Python binds the name to it, so
# `from loopstate import replay` would give the module instead of the function. The module
# imports the recording machinery only when a replay starts.
from loopstate.replay import replay, replay_flow, replay_sync
from loopstate.tools.decorator import tool
from loopstate.tools.registry import ToolRegistry

if TYPE_CHECKING:  # loaded on first use (see __getattr__): `import loopstate` stays fast
    __version__: str
    from loopstate.engine.recording.cassette import Cassette
    from loopstate.engine.recording.recorder import Recorder
    from loopstate.engine.recording.replay import ReplayDivergence, ReplayModel
    from loopstate.engine.stores.postgres import PostgresStore
    from loopstate.machines.flows import (
        Flow,
        FlowData,
        FlowDeps,
        FlowMachine,
        FlowResult,
        Output,
        Phase,
        has_tool_call,
        reads,
        step_count_is,
    )
    from loopstate.replay_from import Departure

_LAZY = {
    "Cassette": "loopstate.engine.recording.cassette",
    "Departure": "loopstate.replay_from",
    "PostgresStore": "loopstate.engine.stores.postgres",  # the `postgres` extra (psycopg)
    "Recorder": "loopstate.engine.recording.recorder",
    "ReplayDivergence": "loopstate.engine.recording.replay",
    "ReplayModel": "loopstate.engine.recording.replay",
    **dict.fromkeys(
        ["Flow", "FlowData", "FlowDeps", "FlowMachine", "FlowResult", "Output", "Phase",
         "has_tool_call", "reads", "step_count_is"],
        "loopstate.machines.flows",
    ),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read from the installed package's metadata, on first use
        from importlib.metadata import version

        globals()[name] = version("loopstate")
        return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'loopstate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Abort",
    "Agent",
    "AgentLoop",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approve",
    "AssistantMessage",
    "Budget",
    "CallRecord",
    "Cassette",
    "CassetteError",
    "Decision",
    "DecisionError",
    "Definition",
    "DefinitionError",
    "Deny",
    "Departure",
    "Edit",
    "Escalate",
    "Event",
    "Flow",
    "FlowData",
    "FlowDeps",
    "FlowMachine",
    "FlowResult",
    "ForkRefused",
    "Gate",
    "Hooks",
    "IncompatibleRun",
    "LiteLLMModel",
    "LoopstateError",
    "MemoryStore",
    "Message",
    "Migration",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Output",
    "ParentLink",
    "Phase",
    "PostgresStore",
    "Recorder",
    "ReplayDivergence",
    "ReplayModel",
    "RetryPolicy",
    "RetryingModel",
    "Rule",
    "RunBusy",
    "RunDamaged",
    "RunFailure",
    "RunInterrupted",
    "RunNotFound",
    "RunNotResumable",
    "RunResult",
    "RunState",
    "RunSummary",
    "RunTree",
    "SQLiteStore",
    "ScriptExhausted",
    "ScriptedModel",
    "StopCondition",
    "Store",
    "StoreError",
    "SystemMessage",
    "TokenBudget",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionWarning",
    "ToolMessage",
    "ToolRegistry",
    "Transition",
    "Turn",
    "UnexpectedRequest",
    "Usage",
    "UsageReport",
    "UserMessage",
    "chain_approvers",
    "compose",
    "has_tool_call",
    "merge",
    "pending_tree",
    "reads",
    "replay",
    "replay_flow",
    "replay_sync",
    "run_tree",
    "step_count_is",
    "tool",
    "usage_tree",
]
