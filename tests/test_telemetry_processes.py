"""One trace across processes, as a backend receives it: a run suspends on a gated call in one
process, `loopstate approve` decides it in a second, a `loopstate worker` resumes it in a third;
or `loopstate serve` takes the decision over HTTP and resumes it. Each process exports over
OTLP/HTTP to a receiver on 127.0.0.1 that parses the protobuf."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from otlp_receiver import ReceivedSpan, receiver
from service_support import start, stop
from support import forking
from worker_support import TESTS, loopstate_process, wait_until_ended

from loopstate import SQLiteStore


def resumed(spans: list[ReceivedSpan]) -> bool:
    return any(s.attributes.get("loopstate.segment") == "resume" for s in spans)


def start_suspended(db: str, endpoint: str) -> tuple[str, str]:
    """A traced run started in a process of its own, suspended on its gated call."""
    env = {**os.environ, "LOOPSTATE_TEST_OTLP": endpoint, "PYTHONPATH": str(TESTS)}
    started = forking.run(
        [sys.executable, str(TESTS / "otel_agent.py"), db],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    run_id, call_id = started.stdout.split()
    return run_id, call_id


@pytest.mark.slow
async def test_a_run_decided_and_resumed_elsewhere_is_one_trace(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    effects, log = tmp_path / "effects.txt", tmp_path / "processes.log"
    with receiver() as otlp:
        run_id, call_id = start_suspended(db, otlp.endpoint)
        decide = ("approve", "--db", db, run_id, call_id)
        approve = loopstate_process(*decide, effects=effects, log=log)
        assert approve.wait(120) == 0
        worker = loopstate_process(
            "worker", "--agent", "otel_agent:agent", "--db", db, "--poll", "0.05",
            effects=effects, log=log, LOOPSTATE_TEST_OTLP=otlp.endpoint,
        )  # fmt: skip
        try:
            store = SQLiteStore(db)
            await wait_until_ended(store, 1, within=120)
            otlp.wait_for(resumed, timeout=60)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
        spans = [s for s in otlp.spans if s.scope == "loopstate"]
    state = await store.load(run_id)
    assert state.status == "done"
    assert {s.trace_id for s in spans} == {state.metadata["trace_context"]["traceparent"][3:35]}
    assert len({s.service for s in spans}) == 2  # the starting process and the worker
    start, resume = sorted(
        (s for s in spans if s.name == "invoke_agent publisher"), key=lambda s: s.start_ns
    )
    assert start.attributes["loopstate.segment"] == "start"
    assert start.attributes["loopstate.status"] == "suspended"
    assert resume.parent_span_id == start.span_id
    assert resume.attributes["loopstate.status"] == "done"
    (approval,) = [s for s in spans if s.name == "loopstate.approval"]
    assert approval.parent_span_id == start.span_id
    assert approval.attributes["gen_ai.tool.call.id"] == call_id
    assert approval.attributes["loopstate.approval.decision"] == "approve"
    assert str(approval.attributes["loopstate.approval.actor"]).startswith("cli:")
    asked = max(t.at for t in state.transitions if t.target == "awaiting_approval")
    assert approval.start_ns == int(asked * 1e9)
    assert (approval.end_ns - approval.start_ns) / 1e9 > 0
    tools = [s for s in spans if s.name == "execute_tool publish"]
    assert [t.parent_span_id for t in tools] == [resume.span_id]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert sorted(c.parent_span_id for c in chats) == sorted([start.span_id, resume.span_id])
    store.close()


@pytest.mark.slow
async def test_a_run_decided_over_http_resumes_in_the_service_in_the_same_trace(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    with receiver() as otlp:
        run_id, call_id = start_suspended(db, otlp.endpoint)
        server = start(
            db, tmp_path / "effects.txt", tmp_path / "serve.log", agent="otel_agent:agent",
            LOOPSTATE_TEST_OTLP=otlp.endpoint,
        )  # fmt: skip
        try:
            with server.client() as client:
                items = client.get("/api/approvals", params={"run_id": run_id}).json()["items"]
                path = f"/api/runs/{run_id}/calls/{call_id}/decision"
                body = {"decision": "approve", "digest": items[0]["digest"]}
                answer = client.post(path, json=body, headers={"Idempotency-Key": "k1"})
                assert answer.status_code == 200, answer.text
            otlp.wait_for(resumed, timeout=60)
        finally:
            stop(server)
        # FastAPI traces the service's requests too, each in a trace of its own: the run's
        # spans are loopstate's.
        spans = [s for s in otlp.spans if s.scope == "loopstate"]
    start_span, resume = sorted(
        (s for s in spans if s.name == "invoke_agent publisher"), key=lambda s: s.start_ns
    )
    assert {s.trace_id for s in spans} == {start_span.trace_id}
    assert resume.parent_span_id == start_span.span_id
    assert resume.service != start_span.service  # written by the service's process
    (approval,) = [s for s in spans if s.name == "loopstate.approval"]
    assert approval.attributes["loopstate.approval.decision"] == "approve"
