"""The workflow's effects, run by workers: one model step, one tool call.

They use the served agent's own model port and executor. A model step is called once per
attempt, never sleeping here: an error that may pass (408, 409, 429, 5xx, 529, no reply) is
retried by Temporal, durably, by the run's retry policy, with the provider's `retry-after` as
the next delay; any other `ModelError` is final. Either way its facts travel with it. A tool
call heartbeats while it runs, so a worker that dies is noticed within the heartbeat timeout;
before a non-idempotent tool's body starts, the activity records that in its heartbeat
details, acknowledged by the server before the body runs: an attempt lost before that point is
simply run again; a later attempt that finds the mark reports the outcome unknown instead.
A tool call the served agent can no longer run (a deploy removed its tool or changed its
schema under a waiting run) fails the activity non-retryably as `IncompatibleRun`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import suppress
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import Payloads
from temporalio.api.workflowservice.v1 import RecordActivityTaskHeartbeatRequest
from temporalio.exceptions import ApplicationError

from loopstate.engine.errors import IncompatibleRun, ModelError
from loopstate.engine.executor import Executor
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.retry import RetryingModel
from loopstate.engine.sanitize import storable
from loopstate.engine.state import CallRecord
from loopstate.engine.tool import Tool, ToolContext
from loopstate.temporal.catalog import Effects, effects
from loopstate.temporal.data import (
    MODEL_ACTIVITY,
    TOOL_ACTIVITY,
    ModelCall,
    ModelStep,
    ToolCallRun,
)

BODY_STARTED = "body_started"
"""A tool attempt's heartbeat detail, `body_started:CALL_ID`, once its body may have begun."""


@activity.defn(name=MODEL_ACTIVITY)
async def complete_model(call: ModelCall) -> ModelStep:
    """One attempt of a model step with the served agent's model (its `RetryingModel`, if
    any, unwrapped: Temporal retries, the activity does not sleep); with its calls classified
    when asked (`classified`)."""
    at = effects(call.agent)
    model = at.model
    assert model is not None, f"{call.agent} calls no model"
    if isinstance(model, RetryingModel):
        model = model.model
    try:
        response = await model.complete(call.request)
    except ModelError as exc:
        raise attempt_failed(exc) from None
    records = classified(call, response, at) if call.classify else None
    return ModelStep(**dict(response), records=records)


def classified(call: ModelCall, response: ModelResponse, at: Effects) -> tuple[CallRecord, ...]:
    """The reply's calls as the served definition classifies them now (unknown tool, invalid
    arguments, forbidden by a rule, gated and why, or approved), the executor's own
    `prepare`: the workflow takes these from its history instead of classifying them itself,
    so a replay under a later definition makes the commands the first execution made."""
    executor = Executor(at.tools, auto_approve=at.auto_approve, deadline=at.deadline)

    def context(call_id: str, tool: str) -> ToolContext[Any]:
        return ToolContext(
            run_id=call.run_id,
            call_id=call_id,
            tool=tool,
            deps=at.deps_for(call.data),
            workspace=at.workspace,
        )

    reply = storable(response).message
    return tuple(executor.prepare(reply.calls, context, call.rules))


def attempt_failed(exc: ModelError) -> ApplicationError:
    """The activity's failure for a model error: retryable (after the provider's
    `retry-after`, when it said) if the same request may pass later, final otherwise."""
    facts = {
        "status": exc.status,
        "error_type": exc.error_type,
        "provider_message": exc.provider_message,
        "retry_after": exc.retry_after,
    }
    passing = exc.retryable or exc.status == 409
    wait = exc.retry_after if passing and exc.retry_after is not None else None
    return ApplicationError(
        str(exc),
        facts,
        type=type(exc).__name__,
        non_retryable=not passing,
        next_retry_delay=timedelta(seconds=wait) if wait is not None else None,
    )


@activity.defn(name=TOOL_ACTIVITY)
async def run_tool(run: ToolCallRun) -> CallRecord:
    """One approved tool call (of an agent, or a flow's phase), through the executor (its
    timeout, retries, truncation), with the idempotency key `run_id:call_id` in its context."""
    at = effects(run.agent)
    record = run.record
    context = ToolContext(
        run_id=run.run_id,
        call_id=record.call_id,
        tool=record.tool,
        deps=at.deps_for(run.data),
        workspace=at.workspace,
    )
    tools = at.tools
    refused = unfit(run.run_id, record, tools)
    if refused is not None:  # a deploy changed the agent under the run: fail, never retry
        raise ApplicationError(refused, type="IncompatibleRun", non_retryable=True)
    executor = Executor(tools)
    tool = tools.get(record.tool)
    mark: tuple[str, ...] = ()
    if tool is not None and not tool.idempotent:  # run at most once: mark the body's start
        mark = (f"{BODY_STARTED}:{record.call_id}",)
        if any(d == mark[0] for d in activity.info().heartbeat_details):
            raise ApplicationError(
                f"{record.tool} began in an earlier attempt that was lost: outcome unknown",
                type="OutcomeUnknown",
                non_retryable=True,
            )
        await _record(mark)
    beat = asyncio.create_task(_heartbeat(mark))
    try:
        return await executor.run(record, context)
    finally:
        beat.cancel()
        with suppress(asyncio.CancelledError):
            await beat


def unfit(run_id: str, record: CallRecord, tools: Mapping[str, Tool]) -> str | None:
    """Why the served agent cannot run this approved call (its tool gone, or its schema no
    longer accepting the arguments), as `IncompatibleRun` says it; None if it can. Retrying
    would not help: the activity fails for good and the workflow is told at once."""
    tool = tools.get(record.tool)
    if tool is None:
        line = f"the served agent lacks tool {record.tool}, which call {record.call_id} needs"
        return str(IncompatibleRun(run_id, (line,)))
    try:
        tool.validate(dict(record.executed_arguments or {}))
    except ValueError:  # pydantic's ValidationError among them
        line = f"tool {record.tool} no longer accepts the arguments of call {record.call_id}"
        return str(IncompatibleRun(run_id, (line,)))
    return None


async def _record(details: tuple[str, ...]) -> None:
    """Heartbeat `details` and wait until the server has them (the SDK's own heartbeats are
    sent in the background, unacknowledged): only then may the body start. A heartbeat the
    server refuses (the attempt timed out meanwhile) raises, and the body never starts."""
    info, client = activity.info(), activity.client()
    payloads = await client.data_converter.encode(list(details))
    await client.workflow_service.record_activity_task_heartbeat(
        RecordActivityTaskHeartbeatRequest(
            task_token=info.task_token,
            details=Payloads(payloads=payloads),
            namespace=client.namespace,
            identity=client.identity,
        )
    )


async def _heartbeat(details: tuple[str, ...]) -> None:
    timeout = activity.info().heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else 10.0
    while True:
        activity.heartbeat(*details)  # the mark, kept: each heartbeat replaces the last
        await asyncio.sleep(interval)
