"""One contract, three stores: MemoryStore, SQLiteStore and PostgresStore behave the same.
Here: runs saved, loaded, listed, resumed, grown and forked, and their definitions. Leases
and claims: `test_store_leases`; the SQLite file itself: `test_store_sqlite_file`."""

from __future__ import annotations

from pathlib import Path

import pytest
import support.stores as stores
from support import make_tools
from support.stores import suspended_agent

from loopstate import Agent, Approve, ForkRefused, RunNotFound, ScriptedModel, StoreError
from loopstate.engine.definition import Definition
from loopstate.engine.messages import UserMessage
from loopstate.engine.models.scripted import call
from loopstate.engine.state import RunState
from loopstate.engine.stores.sqlite import SQLiteStore

handles = stores.handles  # the fixtures: memory, SQLite and PostgreSQL stores
store = stores.store


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


async def test_creating_a_run_twice_is_refused(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.load("run-1")
    with pytest.raises(StoreError, match="run run-1 already exists"):
        await store.create(state, owner="a", now=1.0, ttl=30.0)


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
    grown = await store.save(grown, owner="a", now=1.0, ttl=30.0)
    await store.save(grown, owner="a", now=2.0, ttl=30.0)  # nothing new: nothing appended
    assert (await store.load("run-1")).messages == grown.messages


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
