"""One contract, three stores: MemoryStore, SQLiteStore and PostgresStore behave the same."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from support import make_tools

from loopstate import (
    Agent,
    Approve,
    ForkRefused,
    MemoryStore,
    PostgresStore,
    RunBusy,
    RunNotFound,
    ScriptedModel,
    Store,
    StoreError,
)
from loopstate.engine.definition import Definition
from loopstate.engine.messages import UserMessage
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import CallRecord, QueuedDecision, RunState
from loopstate.engine.store import PauseRequest
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.stores.sqlite_schema import DB_VERSION


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def handles(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Store]]:
    """Opens handles on one store; two handles act as two processes would (memory: one)."""
    opened: list[Store] = []
    memory = MemoryStore()
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else ""

    def open_handle() -> Store:
        handle: Store = {
            "memory": lambda: memory,
            "sqlite": lambda: SQLiteStore(tmp_path / "runs.db"),
            "postgres": lambda: PostgresStore(dsn),
        }[request.param]()
        opened.append(handle)
        return handle

    yield open_handle
    for handle in opened:
        if isinstance(handle, PostgresStore):
            await handle.close()
        elif isinstance(handle, SQLiteStore):
            handle.close()


@pytest.fixture
def store(handles: Callable[[], Store]) -> Store:
    return handles()


def suspended_agent(store, script=None) -> tuple[Agent, object]:
    counted, tools = make_tools()
    script = script or [
        calls(call("read_file", {"path": "a"}), call("write_file", {"path": "b", "content": "x"})),
        "done",
    ]
    return Agent(ScriptedModel(script), tools, store=store, ids=lambda: "run-1"), counted


async def test_a_saved_run_loads_back_equal(store) -> None:
    agent, _ = suspended_agent(store)
    result = await agent.run("go")
    loaded = await store.load("run-1")
    assert loaded.status == "awaiting_approval"
    assert loaded.messages == result.messages
    assert loaded.transitions == result.transitions
    assert [c.status for c in loaded.batch] == ["approved", "awaiting"]


async def test_loading_an_unknown_run_raises_run_not_found(store) -> None:
    with pytest.raises(RunNotFound, match="no run 'ghost'"):
        await store.load("ghost")


async def test_a_live_lease_of_another_owner_makes_the_run_busy(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    with pytest.raises(RunBusy, match="run run-1 is busy"):
        await store.acquire("run-1", owner="b", now=110.0, ttl=30.0)
    state = await store.load("run-1")
    with pytest.raises(RunBusy):
        await store.save(state, owner="b", now=110.0, ttl=30)
    with pytest.raises(RunBusy):
        await store.renew("run-1", owner="b", now=110.0, ttl=30)
    # expired: another owner may take it; released: likewise
    assert (await store.acquire("run-1", owner="b", now=131.0, ttl=30.0)).run_id == "run-1"
    await store.release("run-1", owner="b")
    assert (await store.acquire("run-1", owner="c", now=132.0, ttl=30.0)).run_id == "run-1"


async def test_runs_are_listed_newest_first_and_filtered_by_status(store) -> None:
    for run_id, script in (
        ("r1", ["hi"]),
        ("r2", [call("write_file", {"path": "p", "content": "c"})]),
    ):
        _, tools = make_tools()
        await Agent(ScriptedModel(script), tools, store=store, ids=lambda r=run_id: r).run("go")
    runs = await store.list_runs()
    assert [r.run_id for r in runs] == ["r2", "r1"]
    assert [r.run_id for r in await store.list_runs(status="awaiting_approval")] == ["r2"]
    assert runs[0].pending == 1


async def test_a_whole_run_resumes_from_the_store_with_nothing_run_twice(store) -> None:
    agent, counted = suspended_agent(store)
    suspended = await agent.run("go")
    done = await agent.resume(suspended.run_id, {suspended.pending[0].call_id: Approve()})
    assert done.status == "done"
    assert counted == {"read_file": 1, "write_file": 1}
    assert (await store.load("run-1")).messages == done.messages


async def test_sqlite_stores_only_what_is_new_at_each_save(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    _, tools = make_tools()
    script = [call("read_file", {"path": str(i)}) for i in range(10)] + ["done"]
    await Agent(ScriptedModel(script), tools, store=store, ids=lambda: "r").run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    (messages,) = db.execute("SELECT count(*) FROM messages").fetchone()
    (calls_,) = db.execute("SELECT count(*) FROM calls").fetchone()
    assert (messages, calls_) == (1 + 10 * 2 + 1, 10)
    assert db.execute("SELECT count(*) FROM transitions").fetchone()[0] == 22


async def test_acquiring_an_unknown_run_raises_run_not_found(store) -> None:
    with pytest.raises(RunNotFound, match="no run 'ghost'"):
        await store.acquire("ghost", owner="a", now=1.0, ttl=30.0)


async def test_creating_a_run_twice_is_refused(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.load("run-1")
    with pytest.raises(StoreError, match="run run-1 already exists"):
        await store.create(state, owner="a", now=1.0, ttl=30.0)


async def test_a_released_lease_lets_another_owner_save(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    await store.release("run-1", owner="b")  # not b's: nothing happens
    with pytest.raises(RunBusy):
        await store.acquire("run-1", owner="b", now=101.0, ttl=30.0)
    await store.release("run-1", owner="a")
    ended = state.evolve(state="aborted", stop_reason="test", updated_at=102.0)
    await store.save(ended, owner="b", now=102.0, ttl=30.0)
    assert (await store.load("run-1")).status == "aborted"


async def seeded(tmp_path: Path) -> Path:
    await suspended_agent(SQLiteStore(tmp_path / "runs.db"))[0].run("go")
    return tmp_path / "runs.db"


def corrupt(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE messages SET body = '{\"role\": \"wizard\"}' WHERE idx = 1",
         r"run run-1: corrupt messages row 1: .*role"),
        ("UPDATE messages SET body = 'not json' WHERE idx = 0",
         r"run run-1: corrupt messages row 0: Invalid JSON"),
        ("UPDATE transitions SET body = json_remove(body, '$.target') WHERE seq = 2",
         r"run run-1: corrupt transitions row 2: Field required at \('target',\)"),
        ("UPDATE calls SET body = json_set(body, '$.status', 'teleported') WHERE position = 1",
         r"run run-1: corrupt calls row 1: .* at \('status',\)"),
        ("UPDATE calls SET body = 42 WHERE position = 0", r"run run-1: corrupt calls row 0"),
        ("UPDATE runs SET header = substr(header, 1, 20)", r"run run-1: corrupt runs row header"),
        ("UPDATE runs SET header = json_set(header, '$.steps', 'many')",
         r"run run-1: corrupt runs row header in .*: .* at \('steps',\)"),
        ("DELETE FROM messages WHERE idx = 0", r"run run-1: 1 messages rows .* header says 2"),
        ("DELETE FROM transitions WHERE seq = 1", r"run run-1: 1 transitions rows .* says 2"),
        ("DELETE FROM calls WHERE position = 1", r"run run-1: 1 calls rows .* header says 2"),
    ],
    ids=["message-invalid", "message-not-json", "transition-invalid", "call-invalid",
         "call-not-text", "header-not-json", "header-invalid", "message-lost",
         "transition-lost", "call-lost"],
)  # fmt: skip
async def test_a_corrupt_row_is_a_store_error_naming_the_run_and_the_row(
    tmp_path: Path, sql: str, message: str
) -> None:
    path = await seeded(tmp_path)
    corrupt(path, sql)
    with pytest.raises(StoreError, match=message):
        await SQLiteStore(path).load("run-1")


async def test_a_corrupt_listing_column_lists_the_run_as_damaged_naming_why(
    tmp_path: Path,
) -> None:
    path = await seeded(tmp_path)
    corrupt(path, "UPDATE runs SET steps = 'many'")
    (listed,) = await SQLiteStore(path).list_runs()
    assert (listed.run_id, listed.status) == ("run-1", "damaged")
    assert re.match(r"run run-1: corrupt runs row in .*runs.db", listed.problem or "")


async def test_a_header_that_is_not_utf8_lists_the_run_as_damaged(tmp_path: Path) -> None:
    path = await seeded(tmp_path)
    corrupt(path, "UPDATE runs SET header = CAST(X'7BFF7D' AS TEXT)")
    (listed,) = await SQLiteStore(path).list_runs()
    assert (listed.run_id, listed.status) == ("run-1", "damaged")
    assert "not UTF-8" in (listed.problem or "")


async def test_a_save_of_a_shorter_history_than_stored_is_refused(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.load("run-1")
    for stale in (
        state.evolve(messages=state.messages[:-1]),
        state.evolve(transitions=state.transitions[:-1]),
    ):
        with pytest.raises(StoreError, match="run run-1: refusing to rewrite stored history"):
            await store.save(stale, owner="a", now=1.0, ttl=30.0)
    assert await store.load("run-1") == state


async def test_a_save_appends_only_what_the_store_does_not_hold(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.load("run-1")
    grown = state.evolve(messages=(*state.messages, UserMessage(content="more")))
    await store.save(grown, owner="a", now=1.0, ttl=30.0)
    await store.save(grown, owner="a", now=2.0, ttl=30.0)  # nothing new: nothing appended
    assert (await store.load("run-1")).messages == grown.messages


async def test_renewing_keeps_the_lease_past_its_first_expiry(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    await store.renew("run-1", owner="a", now=125.0, ttl=30.0)
    with pytest.raises(RunBusy):
        await store.acquire("run-1", owner="b", now=140.0, ttl=30.0)  # past 130: still a's
    assert (await store.acquire("run-1", owner="b", now=156.0, ttl=30.0)).run_id == "run-1"
    with pytest.raises(RunNotFound):
        await store.renew("ghost", owner="a", now=1.0, ttl=30.0)


async def test_a_corrupt_message_row_is_a_clear_error_naming_the_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute('UPDATE messages SET body = \'{"role": "wizard"}\' WHERE idx = 1')
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: corrupt messages row 1"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_half_written_json_header_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("UPDATE runs SET header = substr(header, 1, 20)")
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: corrupt runs row header"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_missing_message_row_is_detected(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("DELETE FROM messages WHERE idx = 0")
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: 1 messages rows .* header says 2"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_run_from_a_newer_loopstate_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("UPDATE runs SET header = json_set(header, '$.schema_version', 99)")
    db.commit()
    with pytest.raises(StoreError, match="run run-1 was written by a newer loopstate"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_store_file_from_a_newer_loopstate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(StoreError, match=r"runs.db has store schema 7; .* upgrade loopstate"):
        await SQLiteStore(path).list_runs()


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable loopstate store"):
        await SQLiteStore(path).list_runs()


def test_the_default_path_is_in_the_nearest_project_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As git finds `.git`: the nearest directory up holding `.loopstate/`, `pyproject.toml`
    or `.git`; else the working directory; `LOOPSTATE_DB` first of all."""
    monkeypatch.delenv("LOOPSTATE_DB", raising=False)
    root = tmp_path.resolve()
    (root / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(root / "src" / "deep")
    assert SQLiteStore().path == root / "src" / "deep" / ".loopstate/runs.db"
    (root / "pyproject.toml").write_text("")
    assert SQLiteStore().path == root / ".loopstate/runs.db"
    (root / "src" / ".loopstate").mkdir()
    assert SQLiteStore().path == root / "src" / ".loopstate/runs.db"
    monkeypatch.setenv("LOOPSTATE_DB", str(tmp_path / "chosen.db"))
    assert SQLiteStore().path == tmp_path / "chosen.db"
    assert isinstance(RunState(run_id="x"), RunState)


def waiting(run_id: str, *, updated_at: float, decided: bool = False, **fields: object) -> RunState:
    """A run suspended on one gated call, with its decision queued if `decided`."""
    record = CallRecord(call_id="c1", tool="write_file", raw_arguments="{}", status="awaiting")
    inbox = (QueuedDecision(call_id="c1", decision=Approve(), actor="t", at=1.0),)
    return RunState(
        run_id=run_id, state="awaiting_approval", calls=(record,), updated_at=updated_at,
        inbox=inbox if decided else (), **fields,
    )  # fmt: skip


async def test_claim_leases_each_ready_run_to_one_owner_until_its_lease_ends(store) -> None:
    runs = [
        RunState(run_id="ended", state="done", updated_at=1.0),
        waiting("undecided", updated_at=2.0),
        waiting("decided", updated_at=4.0, decided=True),
        RunState(run_id="crashed", state="executing_tool", updated_at=3.0),
        RunState(run_id="asks-user", state="awaiting_input", phase="p", updated_at=1.5),
    ]
    for run in runs:
        await store.create(run, owner="creator", now=100.0, ttl=10.0)
    assert await store.claim(owner="a", now=105.0, ttl=10.0, limit=10) == []  # creator's
    assert await store.claim(owner="a", now=111.0, ttl=10.0, limit=10) == ["crashed", "decided"]
    assert await store.claim(owner="b", now=112.0, ttl=10.0, limit=10) == []
    with pytest.raises(RunBusy):
        await store.acquire("crashed", owner="b", now=112.0, ttl=10.0)
    await store.release("decided", owner="a")
    assert await store.claim(owner="b", now=113.0, ttl=10.0, limit=1) == ["decided"]
    assert await store.claim(owner="b", now=122.0, ttl=10.0, limit=10) == ["crashed"]


async def test_a_queued_decision_makes_a_suspended_run_ready_and_its_end_unready(store) -> None:
    agent, _ = suspended_agent(store)
    suspended = await agent.run("go")
    later = agent.clock() + 1.0
    assert await store.claim(owner="w", now=later, ttl=30.0, limit=5) == []
    await queue_decision(store, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    assert await store.claim(owner="w", now=later, ttl=30.0, limit=5) == ["run-1"]
    assert (await agent.resume("run-1", owner="w")).status == "done"
    assert await store.claim(owner="v", now=later + 60.0, ttl=30.0, limit=5) == []


async def test_concurrent_claimers_never_get_the_same_run(handles) -> None:
    first, second = handles(), handles()
    for i in range(12):
        await first.create(waiting(f"r{i}", updated_at=float(i), decided=True),
                           owner="c", now=0.0, ttl=1.0)  # fmt: skip
    batches = await asyncio.gather(
        *(
            claimer.claim(owner=name, now=10.0, ttl=30.0, limit=3)
            for _ in range(3)
            for name, claimer in (("a", first), ("b", second))
        )
    )
    claimed = [run_id for batch in batches for run_id in batch]
    assert sorted(claimed) == sorted(f"r{i}" for i in range(12))


async def test_a_sqlite_file_of_schema_1_is_migrated_and_its_ready_runs_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    suspended = await suspended_agent(store)[0].run("go")
    await queue_decision(store, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    store.close()
    for statement in (  # back to what schema 1 was
        "DROP INDEX runs_ready", "ALTER TABLE runs DROP COLUMN ready", "DROP TABLE events",
        "DROP TABLE answers", "DROP INDEX runs_by_updated", "DROP INDEX runs_by_created",
        "DROP TABLE pruned", "PRAGMA user_version = 1",
    ):  # fmt: skip
        corrupt(path, statement)
    assert await SQLiteStore(path).claim(owner="w", now=1e12, ttl=1.0, limit=5) == ["run-1"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (DB_VERSION,)


async def test_a_fork_copies_the_past_through_the_store_and_leaves_the_source_as_it_was(
    handles,
) -> None:
    agent, counted = suspended_agent(handles())
    agent = agent.clone(ids=iter(["run-1", "fork-1", "fork-2"]).__next__)
    suspended = await agent.run("go")
    write = suspended.pending[0].call_id
    await agent.resume("run-1", {write: Approve()})
    source = await handles().load("run-1")  # another handle: as another process reads it
    fork_id = await agent.fork("run-1", at=2, message="and then?")
    fork = await handles().load(fork_id)
    assert await handles().load("run-1") == source
    assert (fork.forked_from.run_id, fork.forked_from.seq) == ("run-1", 2)
    assert fork.transitions == source.transitions[:2]
    assert [(c.call_id, c.status) for c in fork.calls] == [
        (suspended.messages[-1].tool_calls[0].id, "approved"),
        (write, "awaiting"),
    ]
    assert fork.queued_message == "and then?"
    assert [p.call_id for p in fork.pending] == [write]
    assert counted == {"read_file": 1, "write_file": 1}


async def test_a_run_saved_without_fork_points_forks_only_at_its_last_transition(store) -> None:
    agent, _ = suspended_agent(store)
    agent = agent.clone(ids=iter(["run-1", "fork-1", "fork-2"]).__next__)
    suspended = await agent.run("go")
    old = suspended.transitions
    legacy = RunState(
        run_id="old", state="awaiting_approval", messages=suspended.messages,
        transitions=tuple(t.evolve(mark=None) for t in old),
    )  # fmt: skip
    await store.create(legacy, owner="me", now=0.0, ttl=1.0)
    with pytest.raises(ForkRefused, match=f"only at its last transition \\({len(old)}\\)"):
        await agent.fork("old", at=1)
    assert (await store.load(await agent.fork("old", at=len(old)))).state == "awaiting_approval"


async def test_a_pause_request_stands_once_until_it_is_taken(store) -> None:
    assert await store.pause_asked("run-p") is None
    await store.ask_pause("run-p", by="alice", now=10.0)
    await store.ask_pause("run-p", by="bob", now=11.0)  # asking twice asks once
    assert await store.pause_asked("run-p") == PauseRequest(by="alice", at=10.0)
    await store.drop_pause("run-p")
    assert await store.pause_asked("run-p") is None


async def test_a_runs_definition_is_kept_once_and_read_back_by_any_handle(handles) -> None:
    first, second = handles(), handles()
    agent, _ = suspended_agent(first)
    await agent.run("go")
    fingerprint = (await second.load("run-1")).definition
    assert fingerprint == agent.definition.fingerprint
    body = await second.definition(fingerprint)
    assert Definition.model_validate(body) == agent.definition
    await second.keep_definition(fingerprint, {"other": 1})  # kept once: the first stays
    assert await first.definition(fingerprint) == body
    assert await first.definition("0" * 16) is None
