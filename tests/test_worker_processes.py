"""Three `loopstate worker` processes share 60 Postgres runs decided from other processes;
one is SIGKILLed inside a tool. Every run ends, no tool runs twice, no decision is lost, and
the killed worker's runs are taken over at once (its session is gone), not when their
600 s leases expire."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import pytest
import worker_agent
from worker_support import effects_of, loopstate_process, wait_until_ended

from loopstate import Approve, PostgresStore
from loopstate.engine.operations import queue_decision

RUNS = 60  # each worker gets about 20: the killed one reaches its third charge
LEASE = "600"  # never expires within the test: the killed worker's runs are taken over at once


@pytest.mark.slow
async def test_three_workers_end_every_run_once_though_one_is_killed_inside_a_tool(
    postgres_dsn: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    store = PostgresStore(postgres_dsn)
    agent = worker_agent.agent(store)
    pending = {}
    for i in range(RUNS):
        result = await agent.run("go", run_id=f"run-{i:03}")
        pending[result.run_id] = result.pending[0].call_id
    worker_args = ["worker", "--agent", "worker_agent:agent", "--db", postgres_dsn,
                   "--poll", "0.05", "--lease", LEASE]  # fmt: skip
    killed = {"LOOPSTATE_TEST_KILL_AT": "3"}  # inside its third charge, after the effect
    workers = [
        loopstate_process(*worker_args, effects=effects, log=tmp_path / f"w{n}.log", **env)
        for n, env in enumerate([killed, {}, {}])
    ]
    try:
        by_cli = list(pending)[:3]  # decided by `loopstate approve`, the rest by queue_decision
        approve = ["approve", "--db", postgres_dsn]
        approvals = [
            loopstate_process(*approve, r, pending[r], effects=effects, log=tmp_path / "a.log")
            for r in by_cli
        ]
        for n, run_id in enumerate(run_id for run_id in pending if run_id not in by_cli):
            await queue_decision(store, run_id, pending[run_id], Approve(), actor="test")
            if n % 6 == 0:
                await asyncio.sleep(0.05)  # decisions keep arriving while the workers run
        assert [a.wait(60) for a in approvals] == [0, 0, 0]
        await wait_until_ended(store, RUNS)
        assert workers[0].wait(5) == -signal.SIGKILL
        for survivor in workers[1:]:
            survivor.send_signal(signal.SIGTERM)
        assert [w.wait(20) for w in workers[1:]] == [0, 0]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    runs = [await store.load(run_id) for run_id in pending]
    assert Counter(r.status for r in runs) == {"done": RUNS}
    charges = Counter(line.split()[0] for line in effects_of(effects))
    assert set(charges) == set(pending)
    assert set(charges.values()) == {1}  # once, never twice
    calls = [r.calls[0] for r in runs]
    assert all(c.decision is not None and c.decision.kind == "approve" for c in calls)
    deciders = Counter("cli" if (c.decided_by or "").startswith("cli:") else c.decided_by
                       for c in calls)  # fmt: skip
    assert deciders == {"test": RUNS - 3, "cli": 3}  # every decision applied, by its actor
    assert all(not r.inbox for r in runs)
    interrupted = [r.run_id for r, c in zip(runs, calls, strict=True) if c.status == "interrupted"]
    assert 1 <= len(interrupted) <= 4  # the killed worker's runs in hand; taken over after it
    assert Counter(c.status for c in calls)["succeeded"] == RUNS - len(interrupted)
    await store.close()
