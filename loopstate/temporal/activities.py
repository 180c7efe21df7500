"""The workflow's effects, run by workers: one model step, one tool call.

They use the served agent's own model port and executor, so a model step is retried by the
engine's policy (`RetryingModel`), not by litellm's nor blindly by Temporal's: a `ModelError`
is reported to the workflow as non-retryable, with its facts. A tool call heartbeats while it
runs, so a worker that dies is noticed within the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress

from temporalio import activity
from temporalio.exceptions import ApplicationError

from loopstate.engine.errors import ModelError
from loopstate.engine.executor import Executor
from loopstate.engine.model import ModelResponse
from loopstate.engine.state import CallRecord
from loopstate.engine.tool import ToolContext
from loopstate.temporal.catalog import served
from loopstate.temporal.data import MODEL_ACTIVITY, TOOL_ACTIVITY, ModelCall, ToolCallRun


@activity.defn(name=MODEL_ACTIVITY)
async def complete_model(call: ModelCall) -> ModelResponse:
    """One model step with the served agent's model."""
    model = served(call.agent).model
    try:
        return await model.complete(call.request)
    except ModelError as exc:
        facts = {
            "status": exc.status,
            "error_type": exc.error_type,
            "provider_message": exc.provider_message,
            "retry_after": exc.retry_after,
        }
        raise ApplicationError(
            str(exc), facts, type=type(exc).__name__, non_retryable=True
        ) from None


@activity.defn(name=TOOL_ACTIVITY)
async def run_tool(run: ToolCallRun) -> CallRecord:
    """One approved tool call, through the executor (its timeout, retries, truncation), with
    the idempotency key `run_id:call_id` in its context."""
    agent = served(run.agent)
    record = run.record
    context = ToolContext(
        run_id=run.run_id,
        call_id=record.call_id,
        tool=record.tool,
        deps=agent.options.deps,
        workspace=agent.options.workspace,
    )
    executor = Executor({t.name: t for t in agent.tools})
    beat = asyncio.create_task(_heartbeat())
    try:
        return await executor.run(record, context)
    finally:
        beat.cancel()
        with suppress(asyncio.CancelledError):
            await beat


async def _heartbeat() -> None:
    timeout = activity.info().heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else 10.0
    while True:
        activity.heartbeat()
        await asyncio.sleep(interval)
