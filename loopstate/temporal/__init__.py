"""loopstate on Temporal (the `loopstate[temporal]` extra): an `Agent`'s or a `Flow`'s run as
a workflow, its sub-agents and agent phases as child workflows.

    worker = agent_worker(client, {"docs": agent, "coaching": flow})   # on each worker host
    runs = TemporalRuns(client); await runs.start("docs", "...")      # anywhere
    await runs.start_flow("coaching", "..."); await runs.reply(run_id, "...")

See docs/temporal.md. `import loopstate` never imports this package (nor temporalio).
"""

from loopstate.temporal.blobs import BlobCodec, BlobStore, DirectoryBlobs
from loopstate.temporal.client import TemporalRuns, load_state
from loopstate.temporal.data import (
    SEARCH_ATTRIBUTES,
    AbortRequest,
    ChildState,
    DecideRequest,
    PauseRunRequest,
    PendingCall,
    ReplyRequest,
    ResumeRunRequest,
    RunSettings,
    StartFlow,
    StartRun,
)
from loopstate.temporal.flow_workflow import FlowWorkflow
from loopstate.temporal.replay import ReplayReport, replay_history
from loopstate.temporal.worker import DEFAULT_TASK_QUEUE, agent_worker, data_converter
from loopstate.temporal.workflow import AgentWorkflow

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "SEARCH_ATTRIBUTES",
    "AbortRequest",
    "AgentWorkflow",
    "BlobCodec",
    "BlobStore",
    "ChildState",
    "DecideRequest",
    "DirectoryBlobs",
    "FlowWorkflow",
    "PauseRunRequest",
    "PendingCall",
    "ReplayReport",
    "ReplyRequest",
    "ResumeRunRequest",
    "RunSettings",
    "StartFlow",
    "StartRun",
    "TemporalRuns",
    "agent_worker",
    "data_converter",
    "load_state",
    "replay_history",
]
