"""Deciding a suspended run from other processes: exactly where it stopped, partially, or
refused with the stored run unchanged; cancelling a running run is recorded."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from test_durable_runs import Harness

from loopstate import Agent, ScriptedModel, tool
from loopstate.engine import errors
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def decide(**decisions: object) -> tuple[str, str]:
    return ("--decide", json.dumps(decisions))


def stored_rows(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, in a stable order: the whole stored run."""
    db = sqlite3.connect(db_path)
    tables = ("runs", "messages", "transitions", "calls")
    return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}


def test_a_run_with_no_approver_suspends_with_each_gated_calls_tool_arguments_and_reason(
    h: Harness,
) -> None:
    first = h.child("run", "--two-charges")
    assert first["status"] == "awaiting_approval"
    requests = first["requests"]
    assert isinstance(requests, list)
    assert [(r["call_id"], r["tool"], r["arguments"]) for r in requests] == [
        ("call_1_2", "charge", {"amount": 5}),
        ("call_1_3", "charge", {"amount": 7}),
    ]
    assert all(r["reason"] == "charge needs approval" and r["digest"] for r in requests)
    assert h.log() == {"model 1": 1}


def test_the_resuming_process_asks_the_model_only_for_the_turns_after_the_suspension(
    h: Harness,
) -> None:
    h.child("run")
    # This process's model holds turns 2 and 3 only, served in order: a repeated first
    # request would be answered with the wrong turn, one request too many would raise.
    done = h.child("resume", "--from-turn", "2", *decide(call_1_2=["approve"]))
    assert (done["status"], done["stop_reason"]) == ("done", "answer")
    assert h.log() == {"model 1": 1, "model 2": 1, "model 3": 1, "tool put k1": 1,
                       "tool charge 5": 1, "tool put k2": 1}  # fmt: skip


def test_partial_decisions_keep_the_run_suspended_with_the_rest_pending(h: Harness) -> None:
    h.child("run", "--two-charges")
    partial = h.child("resume", "--two-charges", *decide(call_1_2=["approve"]))
    assert (partial["status"], partial["pending"]) == ("awaiting_approval", ["call_1_3"])
    assert h.log() == {"model 1": 1}  # nothing of the batch runs until all of it is decided
    done = h.child("resume", "--two-charges", *decide(call_1_3=["deny", "too much"]))
    assert done["status"] == "done"
    assert (h.log()["tool charge 5"], h.log()["tool charge 7"]) == (1, 0)
    assert "too much" in str(done["output"])
    assert h.log()["model 1"] == 1


def test_a_decision_carrying_the_requests_digest_is_accepted(h: Harness) -> None:
    first = h.child("run")
    request = first["requests"][0]  # type: ignore[index]
    approve = {"kind": "approve", "digest": request["digest"]}
    assert h.child("resume", *decide(call_1_2=approve))["status"] == "done"
    assert h.log()["tool charge 5"] == 1


@pytest.fixture(scope="module")
def half_decided(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    """A run of two gated charges, suspended, then resumed with call_1_2 approved (call_1_3
    still pending), by two processes: once for every case that starts from there."""
    h = Harness(tmp_path_factory.mktemp("half_decided"))
    h.child("run", "--two-charges")
    h.child("resume", "--two-charges", *decide(call_1_2=["approve"]))
    return h


def copy_run(source: Harness, target: Harness) -> None:
    """`source`'s store and log into `target`'s directory (the store through SQLite's own
    backup: whole, whatever its journal holds)."""
    with sqlite3.connect(source.db) as src, sqlite3.connect(target.db) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    shutil.copy(source.root / "log.txt", target.root / "log.txt")


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ({"call_9_9": ["approve"]}, "has no call call_9_9 to decide"),
        ({"call_1_1": ["approve"]}, "call_1_1 (put) is not awaiting a decision"),
        ({"call_1_3": {"kind": "approve", "digest": "0" * 16}}, "made for other arguments"),
        # the second use of a decision already applied by an earlier resume
        ({"call_1_2": ["deny", "changed my mind"]}, "call_1_2 (charge) is not awaiting"),
        # all or none: a good decision next to a refused one is not applied either
        ({"call_1_3": ["approve"], "call_9_9": ["approve"]}, "has no call call_9_9"),
    ],
    ids=["unknown-call", "ungated-call", "other-digest", "second-use", "all-or-none"],
)
def test_a_refused_decision_is_a_decision_error_and_the_stored_run_is_unchanged(
    h: Harness, half_decided: Harness, decisions: dict[str, object], message: str
) -> None:
    copy_run(half_decided, h)
    before = stored_rows(h.db)
    refused = h.child("resume", "--two-charges", "--decide", json.dumps(decisions))
    assert issubclass(getattr(errors, refused["error"]), errors.DecisionError)  # typed
    assert message in str(refused["message"])
    assert stored_rows(h.db) == before
    assert h.log() == {"model 1": 1}
    done = h.child("resume", "--two-charges", *decide(call_1_3=["approve"]))
    assert done["status"] == "done"
    assert (h.log()["tool charge 5"], h.log()["tool charge 7"]) == (1, 1)


async def test_cancelling_a_running_runs_task_leaves_it_where_it_was_saved(
    tmp_path: Path,
) -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Blocks until cancelled."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    path = tmp_path / "runs.db"
    model = ScriptedModel([call("wait_forever")])
    agent = Agent(model, [wait_forever], store=SQLiteStore(path), ids=lambda: "c1")
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stored = await SQLiteStore(path).load("c1")  # as another process would see it
    assert (stored.status, stored.state, stored.stop_reason) == ("running", "executing_tool", None)
    assert stored.transitions[-1].target == "executing_tool"
    other = SQLiteStore(path)  # released: another process takes the run over at once
    await other.acquire("c1", owner="another process", now=time.time(), ttl=60)
    assert len(model.requests) == 1
