"""loopstate on Temporal (the `loopstate[temporal]` extra): an `Agent`'s run as a workflow.

    worker = agent_worker(client, {"docs": agent})    # on each worker host
    runs = TemporalRuns(client); await runs.start("docs", "...")   # anywhere

See docs/temporal.md. `import loopstate` never imports this package (nor temporalio).
"""

from loopstate.temporal.blobs import BlobCodec, BlobStore, DirectoryBlobs
from loopstate.temporal.client import TemporalRuns, load_state
from loopstate.temporal.data import (
    SEARCH_ATTRIBUTES,
    AbortRequest,
    DecideRequest,
    PendingCall,
    RunSettings,
    StartRun,
)
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
    "DecideRequest",
    "DirectoryBlobs",
    "PendingCall",
    "ReplayReport",
    "RunSettings",
    "StartRun",
    "TemporalRuns",
    "agent_worker",
    "data_converter",
    "load_state",
    "replay_history",
]
