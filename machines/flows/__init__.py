"""Flows: multi-phase runs whose phases are the states of a declared machine, with the agent
loop (and its approvals) inside each phase and gates written in code between them."""

from loopstate.machines.flows.flow import Flow
from loopstate.machines.flows.machine import FlowMachine
from loopstate.machines.flows.phase import (
    FlowData,
    Output,
    Phase,
    Update,
    has_tool_call,
    step_count_is,
)
from loopstate.machines.flows.result import FlowDeps, FlowResult
from loopstate.machines.flows.typed import reads

__all__ = [
    "Flow",
    "FlowData",
    "FlowDeps",
    "FlowMachine",
    "FlowResult",
    "Output",
    "Phase",
    "Update",
    "has_tool_call",
    "reads",
    "step_count_is",
]
