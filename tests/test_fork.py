"""Forks: a run copied at a transition, over real HTTP to a model server that counts requests,
in a real SQLite file — the past is neither asked of the model nor run again."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelServer, serve, text_reply, tool_call_reply
from support import forking

from loopstate import (
    Agent,
    Approve,
    Deny,
    ForkRefused,
    MemoryStore,
    RunBusy,
    RunNotResumable,
    RunState,
    ScriptedModel,
    Tool,
    Transition,
    UserMessage,
    tool,
)
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

SOURCE = (
    tool_call_reply(("r1", "read_file", {"path": "a"})),
    tool_call_reply(("w1", "write_file", {"path": "b", "content": "x"})),
    tool_call_reply(("r2", "read_file", {"path": "c"})),
    text_reply("All done."),
)
"""Nine transitions: start, read (2-3), a gated write approved (4-6), read (7-8), answer (9)."""


def counted_tools() -> tuple[Counter[str], list[Tool]]:
    runs: Counter[str] = Counter()

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        runs["read_file"] += 1
        return f"contents of {path}"

    @tool(needs_approval=True)
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        runs["write_file"] += 1
        return f"wrote {path}"

    return runs, [read_file, write_file]


async def approve_all(requests: Any) -> dict[str, Any]:
    return {r.call_id: Approve() for r in requests}


def agent(server: ModelServer, db: Path, tools: list[Tool], name: str = "m", **kw: Any) -> Agent:
    model = LiteLLMModel(f"openai/{name}", api_base=server.openai_base, api_key="sk-test")
    return Agent(model, tools, store=SQLiteStore(db), **kw)


def rows(db: Path, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the SQLite file holds for the run, byte for byte."""
    with sqlite3.connect(db) as conn:
        return {
            table: conn.execute(
                f"SELECT * FROM {table} WHERE run_id = ? ORDER BY 2", (run_id,)
            ).fetchall()
            for table in ("runs", "messages", "transitions", "calls")
        }


def told(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"]]


async def source_run(server: ModelServer, db: Path) -> tuple[str, Counter[str], Agent]:
    runs, tools = counted_tools()
    a = agent(server, db, tools, approver=approve_all)
    result = await a.run("Do the work.")
    assert result.status == "done"
    assert len(result.transitions) == 9
    return result.run_id, runs, a


async def test_a_fork_at_six_of_nine_copies_the_past_and_resumes_with_only_the_later_calls(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, runs, a = await source_run(server, db)
        before, executed = rows(db, run_id), +runs
        assert len(server.requests) == 4

        fork_id = await a.fork(run_id, at=6)
        assert len(server.requests) == 4
        assert runs == executed
        assert rows(db, run_id) == before

        fork = await a.store.load(fork_id)
        assert fork.forked_from is not None
        assert (fork.forked_from.run_id, fork.forked_from.seq) == (
            run_id,
            6,
        )
        assert fork.state == "thinking"
        assert fork.steps == 2
        assert len(fork.transitions) == 6
        server.script(tool_call_reply(("r9", "read_file", {"path": "z"})), text_reply("Forked."))
        result = await a.resume(fork_id)

    assert (result.status, result.output) == ("done", "Forked.")
    assert len(server.requests) == 6  # exactly the two model calls after transition 6
    assert runs - executed == Counter(read_file=1)  # only the fork's own read
    assert told(server.bodies[4]) == told(server.bodies[2])  # the fork's first call: the past
    assert rows(db, run_id) == before
    assert result.steps == 4
    assert len(result.transitions) == 9


async def test_a_fork_at_a_gated_call_approved_in_the_source_waits_for_a_new_decision(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, runs, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=4)
        queued = a.clone(approver=None)
        server.script(text_reply("Not written, then."))
        waiting = await queued.resume(fork_id)
        assert waiting.status == "awaiting_approval"
        assert [p.call_id for p in waiting.pending] == ["w1"]
        result = await queued.resume(fork_id, {"w1": Deny("not today")})

    assert result.output == "Not written, then."
    assert runs["write_file"] == 1
    assert "not today" in told(server.bodies[-1])[-1]


async def test_a_fork_of_a_call_mid_tool_reports_it_as_the_source_did(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, runs, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=2)  # thinking → executing_tool: the read started
        assert (await a.store.load(fork_id)).state == "executing_tool"
        server.script(text_reply("Read it."))
        result = await a.resume(fork_id)

    assert result.output == "Read it."
    assert runs["read_file"] == 2
    assert told(server.bodies[-1])[-1] == "contents of a"


async def test_a_fork_resumed_by_an_agent_with_another_model_continues_with_that_model(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server, serve(text_reply("Other model here.")) as other:
        run_id, _, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=8)
        _, tools = counted_tools()
        result = await agent(other, db, tools, name="other-model").resume(fork_id)

    assert result.output == "Other model here."
    assert len(server.requests) == 4
    assert [r.body["model"] for r in other.requests] == ["other-model"]


async def test_replace_result_sends_the_replaced_text_to_the_model(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=3, replace_result={"r1": "the file is empty"})
        fork = await a.store.load(fork_id)
        assert fork.forked_from is not None
        assert fork.forked_from.edits() == ["result of call r1 replaced"]
        assert fork.forked_from.by == "user"
        server.script(text_reply("Empty, then."))
        await a.resume(fork_id)
        source = await a.store.load(run_id)

    assert told(server.bodies[-1])[-1] == "the file is empty"
    assert "contents of a" in [getattr(m, "content", None) for m in source.messages]


async def test_a_message_at_a_resting_fork_continues_the_conversation_differently(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=9, message="Now in French.")
        server.script(text_reply("Tout est fait."))
        result = await a.resume(fork_id)

    assert result.output == "Tout est fait."
    assert told(server.bodies[-1])[-2:] == ["All done.", "Now in French."]


async def test_replace_message_changes_a_user_message_before_the_model_sees_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=1, replace_message=(0, "Do other work."))
        server.script(text_reply("Other work done."))
        await a.resume(fork_id)

    assert told(server.bodies[-1]) == ["Do other work."]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"at": 10}, "has no transition 10 (it has 1–9)"),
        ({"at": 0}, "has no transition 0"),
        ({"at": 3, "replace_result": {"nope": "x"}}, "no result of call 'nope'"),
        ({"at": 3, "replace_message": (1, "x")}, "message 1 at the fork point is not a user"),
        ({"at": 9, "message": "  "}, "the message is empty"),
    ],
)
async def test_a_fork_that_cannot_be_made_is_refused_in_one_line_and_writes_nothing(
    tmp_path: Path, kwargs: dict[str, Any], expected: str
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        with pytest.raises(ForkRefused, match=re.escape(expected)) as refused:
            await a.fork(run_id, **kwargs)
    assert "\n" not in str(refused.value)
    assert [r.run_id for r in await a.store.list_runs()] == [run_id]
    with sqlite3.connect(db) as conn:  # the source's lease was given back
        lease = conn.execute("SELECT lease_owner FROM runs WHERE run_id = ?", (run_id,))
        assert lease.fetchone() == (None,)


async def test_a_fork_of_a_run_another_process_drives_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        await a.store.acquire(run_id, owner="elsewhere:1:x", now=a.clock(), ttl=60)
        with pytest.raises(RunBusy, match="busy"):
            await a.fork(run_id, at=6)


CHILD = Path(__file__).with_name("fork_child.py")


def child(db: Path, server: ModelServer, *args: str) -> subprocess.Popen[str]:
    log = db.with_name("tools.log")
    return forking.Popen(
        [sys.executable, str(CHILD), str(db), str(log), server.openai_base, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def last_line(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_run_killed_mid_tool_is_forked_in_one_process_and_resumed_in_another(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(tool_call_reply(("b1", "block", {})), text_reply("Recovered.")) as server:
        source = child(db, server, "run")
        assert source.stdout is not None
        assert source.stdout.readline() == "started\n"
        source.send_signal(signal.SIGKILL)
        source.communicate(timeout=300)
        before = rows(db, "source")

        fork_id = last_line(child(db, server, "fork", "source", "2"))
        assert len(server.requests) == 1
        result = json.loads(last_line(child(db, server, "resume", fork_id)))

    assert result == {"status": "done", "output": "Recovered."}
    assert (tmp_path / "tools.log").read_text() == "block\n"  # the source's start, only
    assert "interrupted" in told(server.bodies[1])[-1]  # reported as its process left it
    # The source's history, calls and header are as they were; only the dead process's
    # lease, which the fork took over to read the run, was given back (cleared).
    after = rows(db, "source")
    assert {t: after[t] for t in ("messages", "transitions", "calls")} == {
        t: before[t] for t in ("messages", "transitions", "calls")
    }
    assert after["runs"][0][:10] == before["runs"][0][:10]


async def test_a_fork_resumed_by_an_agent_without_the_tools_its_calls_need_is_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server:
        run_id, _, a = await source_run(server, db)
        fork_id = await a.fork(run_id, at=4)
        _, tools = counted_tools()
        reader = agent(server, db, [t for t in tools if t.name == "read_file"])
        with pytest.raises(RunNotResumable, match="lacks write_file") as refused:
            await reader.resume(fork_id)
    assert "\n" not in str(refused.value)
    assert len(server.requests) == 4
    assert (await a.store.load(fork_id)).state == "awaiting_approval"  # unchanged, resumable


async def test_a_fork_made_by_an_agent_with_other_instructions_runs_under_them(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(*SOURCE) as server, serve(text_reply("Done, tersely.")) as other:
        run_id, _, _ = await source_run(server, db)
        _, tools = counted_tools()
        terse = agent(other, db, tools, name="other-model", instructions="Be terse.")
        fork_id = await terse.fork(run_id, at=8)
        result = await terse.resume(fork_id)
        fork = await terse.store.load(fork_id)

    assert result.output == "Done, tersely."
    assert told(other.bodies[0])[0] == "Be terse."
    assert told(other.bodies[0])[1:] == told(server.bodies[3])  # the past, as the source had it
    assert fork.forked_from is not None
    assert fork.forked_from.edits() == ["instructions replaced"]


async def test_a_fork_keeps_the_runs_metadata_but_not_its_trace() -> None:
    store = MemoryStore()
    now = Transition(seq=1, source="idle", target="thinking", event="start", at=1.0)
    source = RunState(
        run_id="src", state="thinking", messages=(UserMessage(content="hi"),), transitions=(now,),
        metadata={"team": "docs", "trace_context": {"traceparent": "00-ab-cd-01"}},
    )  # fmt: skip
    await store.create(source, owner="me", now=1.0, ttl=1.0)
    await store.release("src", owner="me")
    a = Agent(ScriptedModel([]), store=store, ids=lambda: "fork")
    fork = await store.load(await a.fork("src", at=1))
    assert fork.metadata == {"team": "docs"}
    assert (await store.load("src")).metadata["trace_context"] == {"traceparent": "00-ab-cd-01"}


async def test_a_fork_at_the_transition_that_ended_a_run_is_refused_before_it_is_not() -> None:
    _, tools = counted_tools()
    script = ScriptedModel([call("write_file", {"path": "b", "content": "x"}), "Written."])
    a = Agent(script, tools, store=MemoryStore(), ids=iter(["src", "f1", "f2"]).__next__)
    waiting = await a.run("Write b.")
    ended = await a.abort(waiting.run_id, "changed my mind")
    last = len(ended.transitions)
    with pytest.raises(ForkRefused, match=f"transition {last} of run src ends it \\(aborted\\)"):
        await a.fork("src", at=last)
    fork = await a.store.load(await a.fork("src", at=last - 1))
    assert (fork.status, fork.stop_reason, [p.tool for p in fork.pending]) == (
        "awaiting_approval",
        None,
        ["write_file"],
    )
