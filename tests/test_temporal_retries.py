"""Passing faults on Temporal are retried durably: a model server over real HTTP answers 429
(retry-after 1) or 500, and Temporal (not a sleep inside the activity) retries the step by the
agent's `RetryPolicy`; spent retries leave the run in `model_failed`, where
`loopstate temporal retry` (an Update) calls the model again, as `resume` does locally."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from model_server import ModelServer, Reply, error_reply, serve, text_reply
from support import forking
from temporal_support import Served, serving
from temporalio.api.enums.v1 import EventType

from loopstate import Agent, LiteLLMModel, MemoryStore, RetryPolicy, RunState
from loopstate.engine.errors import ModelError
from loopstate.temporal import agent_worker
from loopstate.temporal.activities import attempt_failed

pytestmark = pytest.mark.slow


@asynccontextmanager
async def http_worker(
    address: str, tmp_path: Path, server: ModelServer, retry: RetryPolicy
) -> AsyncIterator[Served]:
    model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k")
    agent = Agent(model, store=MemoryStore(), retry=retry)
    async with serving(address, tmp_path, worker=False) as s:
        worker = agent_worker(s.client, {"http": agent}, task_queue=s.task_queue)
        async with worker:
            yield s


def rate_limited() -> Reply:
    return Reply(status=429, headers=(("retry-after", "1"),))


async def test_a_rate_limit_is_retried_by_temporal_after_the_providers_retry_after(
    temporal_address: str, tmp_path: Path
) -> None:
    policy = RetryPolicy(attempts=4, backoff_s=0.1, max_delay_s=0.5)
    with serve(rate_limited(), rate_limited(), text_reply("answered")) as server:
        async with http_worker(temporal_address, tmp_path, server, policy) as s:
            run_id = await s.runs.start("http", "hello", run_id="rate-limited")
            result = await s.runs.result(run_id)
            history = await s.client.get_workflow_handle(run_id).fetch_history()
    assert (result.status, result.output) == ("done", "answered")
    assert len(server.requests) == 3  # one request per attempt: nothing retried inside
    [started] = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    attempts = started.activity_task_started_event_attributes
    assert attempts.attempt == 3  # the third attempt answered
    assert "429" in attempts.last_failure.message or "RateLimit" in attempts.last_failure.message


def test_a_passing_fault_asks_temporal_for_the_providers_retry_after_and_auth_is_final() -> None:
    # The delay itself is Temporal's to keep: timed from outside, its retry timers fired early
    # (1.3-1.9 s for two 1 s waits), so what is checked is what the activity asks of it.
    limited = attempt_failed(ModelError("slow down", status=429, retry_after=1.0))
    assert (limited.non_retryable, limited.next_retry_delay) == (False, timedelta(seconds=1))
    down = attempt_failed(ModelError("down", status=503))
    assert (down.non_retryable, down.next_retry_delay) == (False, None)
    denied = attempt_failed(ModelError("no key", status=401, retry_after=1.0))
    assert (denied.non_retryable, denied.next_retry_delay) == (True, None)


async def test_spent_retries_rest_in_model_failed_until_temporal_retry(
    temporal_address: str, tmp_path: Path
) -> None:
    policy = RetryPolicy(attempts=2, backoff_s=0.1, max_delay_s=0.2)
    with serve(error_reply(500), error_reply(500), text_reply("recovered")) as server:
        async with http_worker(temporal_address, tmp_path, server, policy) as s:
            run_id = await s.runs.start("http", "hello", run_id="server-errors")
            state = await wait_for_state(s, run_id, "model_failed")
            assert state.status == "failed"
            assert state.failure is not None
            assert state.failure.status == 500
            retried = await asyncio.to_thread(
                forking.run,
                [sys.executable, "-m", "loopstate", "temporal", "retry", run_id,
                 "--address", temporal_address, "--task-queue", s.task_queue],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert retried.returncode == 0, retried.stderr
            assert f"retry accepted for run {run_id}" in retried.stdout
            result = await s.runs.result(run_id)
    assert (result.status, result.output) == ("done", "recovered")
    assert len(server.requests) == 3
    moves = [(t.source, t.target, t.actor) for t in result.transitions]
    assert ("thinking", "model_failed", "system") in moves
    [(_, _, by)] = [m for m in moves if m[:2] == ("model_failed", "thinking")]
    assert (by or "").startswith("cli:")  # the CLI's retry, by whoever ran it


async def test_a_run_in_model_failed_can_be_aborted(temporal_address: str, tmp_path: Path) -> None:
    policy = RetryPolicy(attempts=1)
    with serve(error_reply(503)) as server:
        async with http_worker(temporal_address, tmp_path, server, policy) as s:
            run_id = await s.runs.start("http", "hello", run_id="abort-model-failed")
            await wait_for_state(s, run_id, "model_failed")
            await s.runs.abort(run_id, "provider is down")
            result = await s.runs.result(run_id)
    assert (result.status, result.stop_reason) == ("aborted", "aborted: provider is down")


async def wait_for_state(s: Served, run_id: str, state: str) -> RunState:
    """The run's state once it is `state` (2 min at most: a margin for a loaded machine)."""
    for _ in range(2400):
        current = await s.runs.state(run_id)
        if current.state == state:
            return current
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {state} (is {current.state})")


async def test_an_auth_error_is_final_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    policy = RetryPolicy(attempts=3, backoff_s=0.1)
    with serve(error_reply(401), text_reply("never")) as server:
        async with http_worker(temporal_address, tmp_path, server, policy) as s:
            run_id = await s.runs.start("http", "hello", run_id="unauthorized")
            result = await s.runs.result(run_id)
    assert result.status == "failed"
    assert result.failure is not None
    assert result.failure.status == 401
    assert len(server.requests) == 1  # not retried: resuming cannot fix a key
