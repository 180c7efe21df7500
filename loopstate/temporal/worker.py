"""A Temporal worker that serves agents and flows: the workflows, their two activities, and the
sandbox settings the machine needs (python-statemachine does not import inside the sandbox, and
loopstate must be the same module inside and out: see `catalog`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from loopstate.machines.agent.agent import Agent
from loopstate.machines.flows.flow import Flow
from loopstate.temporal.activities import complete_model, run_tool
from loopstate.temporal.blobs import DEFAULT_THRESHOLD, BlobCodec, DirectoryBlobs
from loopstate.temporal.catalog import serve
from loopstate.temporal.flow_workflow import FlowWorkflow
from loopstate.temporal.workflow import AgentWorkflow

DEFAULT_TASK_QUEUE = "loopstate"
PASSTHROUGH = ("statemachine", "loopstate", "pydantic", "pydantic_core", "structlog", "jsonschema")


def data_converter(
    blobs: str | Path | None = None, *, threshold: int = DEFAULT_THRESHOLD
) -> DataConverter:
    """Pydantic payloads; with `blobs` (a directory every client and worker shares), those past
    `threshold` bytes are passed by reference (`BlobCodec`)."""
    if blobs is None:
        return pydantic_data_converter
    codec = BlobCodec(DirectoryBlobs(blobs), threshold=threshold)
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec)


def sandbox_runner() -> SandboxedWorkflowRunner:
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def agent_worker(
    client: Client,
    agents: Mapping[str, Agent | Flow],
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    **options: Any,
) -> Worker:
    """A worker for `agents` (agents and flows, by the name runs are started with; their
    sub-agents and agent phases run as child workflows) on `task_queue`. Run it with
    `await worker.run()` or `async with worker:`; `options` go to `temporalio.worker.Worker`."""
    serve(agents)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow, FlowWorkflow],
        activities=[complete_model, run_tool],
        workflow_runner=sandbox_runner(),
        **options,
    )
