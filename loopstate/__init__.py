"""loopstate: an explicit state-machine orchestration engine for LLM agents.

A declarative state machine owns the loop (thinking → awaiting_approval → executing_tool →
thinking); the model is called one step at a time and never runs tools itself.
"""

from loopstate.engine.approval import Abort, ApprovalRequest, Approve, Decision, Deny, Edit
from loopstate.engine.errors import (
    DecisionError,
    DefinitionError,
    LoopstateError,
    ModelError,
    RunBusy,
    RunNotFound,
    RunNotResumable,
    ScriptExhausted,
    StoreError,
    UnexpectedRequest,
)
from loopstate.engine.events import Event
from loopstate.engine.hooks import Hooks, compose, merge
from loopstate.engine.litellm_model import LiteLLMModel
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from loopstate.engine.model import Model, ModelRequest, ModelResponse, ToolDefinition, Usage
from loopstate.engine.result import RunResult
from loopstate.engine.runner import StopCondition
from loopstate.engine.scripted import ScriptedModel, Turn
from loopstate.engine.state import CallRecord, RunState, Transition
from loopstate.engine.store import MemoryStore, RunSummary, Store
from loopstate.engine.tool import Tool, ToolContext
from loopstate.machines.agent import Agent
from loopstate.machines.agent_loop import AgentLoop
from loopstate.tools.decorator import tool
from loopstate.tools.registry import ToolRegistry

__all__ = [
    "Abort",
    "Agent",
    "AgentLoop",
    "ApprovalRequest",
    "Approve",
    "AssistantMessage",
    "CallRecord",
    "Decision",
    "DecisionError",
    "DefinitionError",
    "Deny",
    "Edit",
    "Event",
    "Hooks",
    "LiteLLMModel",
    "LoopstateError",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "RunBusy",
    "RunNotFound",
    "RunNotResumable",
    "RunResult",
    "RunState",
    "RunSummary",
    "ScriptExhausted",
    "ScriptedModel",
    "StopCondition",
    "Store",
    "StoreError",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolMessage",
    "ToolRegistry",
    "Transition",
    "Turn",
    "UnexpectedRequest",
    "Usage",
    "UserMessage",
    "compose",
    "merge",
    "tool",
]
