"""A run whose model call failed in a way that may pass stops in `model_failed` and resumes from
that step; the agent's retry policy retries such calls first. Real HTTP, real SQLite files."""

from __future__ import annotations

from pathlib import Path

import provider_replies as pr
import pytest
from model_server import error_reply, raw_reply, serve, text_reply, tool_call_reply
from support import make_tools
from test_providers_over_http import compatible

from loopstate import Agent, RetryPolicy, RunNotResumable
from loopstate.engine.stores.sqlite import SQLiteStore


async def test_a_run_stopped_by_an_unavailable_model_resumes_from_the_failed_step(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    counted, tools = make_tools()
    replies = (tool_call_reply(("c1", "read_file", {"path": "a"})), error_reply(503))
    with serve(*replies, text_reply("Done.")) as s:
        first = await Agent(compatible(s, "openai/m"), tools, store=SQLiteStore(db)).run("go")
        assert (first.status, first.failure and first.failure.status) == ("failed", 503)
        stored = await SQLiteStore(db).load(first.run_id)
        assert (stored.state, stored.status, stored.failure) == (
            "model_failed",
            "failed",
            first.failure,
        )

        again = Agent(compatible(s, "openai/m"), tools, store=SQLiteStore(db))
        resumed = await again.resume(first.run_id, actor="ops")
    assert (resumed.status, resumed.output, resumed.error) == ("done", "Done.", None)
    assert counted["read_file"] == 1  # the step before the failure did not run again
    assert len(s.requests) == 3
    assert s.bodies[2]["messages"] == s.bodies[1]["messages"]  # the same request, again
    trail = [(t.source, t.target, t.event, t.actor) for t in resumed.transitions]
    assert ("thinking", "model_failed", "model_error", "system") in trail
    assert ("model_failed", "thinking", "retry", "ops") in trail
    assert resumed.transitions[-1].target == "done"


async def test_a_run_failed_by_a_bad_request_is_not_resumable(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serve(error_reply(400)) as s:
        result = await Agent(compatible(s, "openai/m"), store=SQLiteStore(db)).run("go")
    assert (result.status, result.transitions[-1].target) == ("failed", "failed")
    with pytest.raises(RunNotResumable, match="has ended"):
        await Agent(compatible(s, "openai/m"), store=SQLiteStore(db)).resume(result.run_id)


async def test_a_run_stopped_by_a_model_error_can_be_aborted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serve(error_reply(503)) as s:
        agent = Agent(compatible(s, "openai/m"), store=SQLiteStore(db))
        stopped = await agent.run("go")
    aborted = await agent.abort(stopped.run_id, "gave up", actor="ops")
    assert (aborted.status, aborted.stop_reason) == ("aborted", "aborted: gave up")
    assert aborted.transitions[-1].source == "model_failed"


async def test_the_agents_retry_policy_waits_as_the_provider_asked_then_succeeds() -> None:
    limited = raw_reply(pr.openai_rate_limit(), status=429, headers=(("retry-after", "0"),))
    with serve(limited, text_reply("Done.")) as s:
        agent = Agent(compatible(s, "openai/m"), retry=RetryPolicy(attempts=2, backoff_s=5))
        result = await agent.run("go")
    assert (result.status, result.output, len(s.requests)) == ("done", "Done.", 2)
    assert [t.target for t in result.transitions] == ["thinking", "done"]
