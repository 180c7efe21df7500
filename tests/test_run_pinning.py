"""Runs that outlive a deploy, across real processes: a run started under one agent
(`deploy_agents.py`) is resumed by the CLI under another; it goes on when the change is
compatible (and the change is recorded), is refused with each difference listed and nothing
changed when it is not, and is migrated when a migration is declared for its definition."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_support import TOKEN, stop, wait_for
from service_support import start as start_server
from support import forking
from support.cli import loopstate_process

from loopstate import Approve, SQLiteStore

HERE = Path(__file__).parent


def start(db: Path, effects: Path, *runs: str, approve: bool = False) -> None:
    """Start each `RUN_ID=VARIANT` of `runs` in one process of its own: each suspends on its
    refund (with `approve`, an approval is queued for it, as `loopstate approve` does)."""
    flags = ["--approve"] if approve else []
    started = forking.run(
        [sys.executable, str(HERE / "deploy_agents.py"), str(db), *flags, *runs],
        capture_output=True, text=True, timeout=60, env={**os.environ, **_env(db, effects)},
    )  # fmt: skip
    assert started.stdout.split() == ["awaiting_approval"] * len(runs), started.stderr


def cli(db: Path, effects: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return loopstate_process(*args, "--db", str(db), cwd=db.parent, env=_env(db, effects))


def _env(db: Path, effects: Path) -> dict[str, str | None]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {"LOOPSTATE_DB": str(db), "LOOPSTATE_TEST_EFFECTS": str(effects), "PYTHONPATH": path}


def rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return [
            *conn.execute("SELECT run_id, header FROM runs ORDER BY run_id"),
            *conn.execute("SELECT run_id, position, body FROM calls ORDER BY run_id, position"),
            *conn.execute("SELECT count(*) FROM messages"),
            *conn.execute("SELECT count(*) FROM transitions"),
        ]


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    path = tmp_path / "effects.txt"
    path.touch()
    return path


def test_a_run_resumes_under_an_agent_with_an_added_tool_and_the_change_is_recorded(
    tmp_path: Path, effects: Path
) -> None:
    db = tmp_path / "runs.db"
    start(db, effects, "run-1=v1", approve=True)
    resumed = cli(db, effects, "resume", "run-1", "--agent", "deploy_agents:v2_added")
    assert resumed.returncode == 0, resumed.stderr
    assert effects.read_text().splitlines() == ["run-1 call_1_1 refunded A1"]
    with sqlite3.connect(db) as conn:
        (kept,) = conn.execute("SELECT count(*) FROM definitions").fetchone()
        (header,) = conn.execute("SELECT header FROM runs").fetchone()
    (record,) = json.loads(header)["redefinitions"]
    assert record["changes"] == ["tool note added"]
    assert (record["migration"], kept) == (None, 2)
    assert json.loads(header)["definition"] == record["after"] != record["before"]


def test_a_run_whose_pending_calls_tool_is_gone_is_refused_and_left_as_it_was(
    tmp_path: Path, effects: Path
) -> None:
    db = tmp_path / "runs.db"
    start(db, effects, "run-1=v1", approve=True)
    before = rows(db)
    refused = cli(db, effects, "resume", "run-1", "--agent", "deploy_agents:v2_removed")
    assert refused.returncode == 2
    assert refused.stderr == (  # one line, each difference once
        "loopstate resume: run run-1 cannot resume under this definition (nothing was "
        "changed): run run-1 needs the tools refund for its pending calls and this agent "
        "lacks refund\n"
    )
    assert "Traceback" not in refused.stderr
    assert rows(db) == before  # its header, calls, messages and transitions
    assert effects.read_text() == ""


def test_a_declared_migration_renames_the_pending_call_which_is_decided_anew_and_runs_once(
    tmp_path: Path, effects: Path
) -> None:
    db = tmp_path / "runs.db"
    start(db, effects, "run-1=v1", approve=True)  # an approval queued for the old form
    migrated = cli(db, effects, "resume", "run-1", "--agent", "deploy_agents:v2")
    assert migrated.returncode == 0, migrated.stderr
    assert "awaiting_approval" in migrated.stdout  # the queued approval was for `refund`
    assert effects.read_text() == ""
    shown = cli(db, effects, "runs", "show", "run-1", "--json")
    state = json.loads(shown.stdout)
    (call,) = [c for c in state["calls"] if c["call_id"] == "call_1_1"]
    assert (call["tool"], call["status"], state["inbox"]) == ("issue_refund", "awaiting", [])
    (record,) = state["redefinitions"]
    assert record["migration"] == "rename_refund"
    assert "queued decision for call_1_1 dropped: made for the old form" in record["changes"]
    text = cli(db, effects, "runs", "show", "run-1").stdout.splitlines()
    assert text[1].startswith(f"migrated by rename_refund under definition {record['after']} (was ")
    assert cli(db, effects, "approve", "run-1", "call_1_1").returncode == 0
    done = cli(db, effects, "resume", "run-1", "--agent", "deploy_agents:v2")
    assert done.returncode == 0, done.stderr
    assert effects.read_text().splitlines() == ["run-1 call_1_1 issued refund for A1"]


def test_runs_check_gives_each_runs_verdict_and_fails_the_deploy_if_one_is_incompatible(
    tmp_path: Path, effects: Path
) -> None:
    db = tmp_path / "runs.db"
    start(db, effects, "run-a=v2_pre", "run-b=v1", "run-c=v0")
    checked = cli(db, effects, "runs", "check", "--agent", "deploy_agents:v2")
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.splitlines() == [
        "run-a  awaiting_approval  compatible: tool note added",
        "run-b  awaiting_approval  migrates by rename_refund: version 2025-10 → 2025-11; "
        "tool refund is gone; tool issue_refund added; tool note added",
        "run-c  awaiting_approval  incompatible: run run-c needs the tools refund for its "
        "pending calls and this agent lacks refund",
        "3 runs checked, 1 incompatible",
    ]
    assert cli(db, effects, "abort", "run-c", "--reason", "old").returncode == 0
    passed = cli(db, effects, "runs", "check", "--agent", "deploy_agents:v2", "--json")
    assert passed.returncode == 0, passed.stderr
    verdicts = [(r["run_id"], r["verdict"], r["migration"]) for r in json.loads(passed.stdout)]
    assert verdicts == [("run-a", "compatible", None), ("run-b", "migrates", "rename_refund")]


async def test_a_run_stored_before_definitions_were_recorded_loads_and_resumes(
    tmp_path: Path, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with no fingerprint (what an older loopstate stored) is judged on what it holds:
    its pending call's tool is there, so it resumes, and is pinned from then on."""
    import deploy_agents

    db = tmp_path / "runs.db"
    start(db, effects, "run-1=v1")
    with sqlite3.connect(db) as conn:  # as an older loopstate left it: no definition
        (header,) = conn.execute("SELECT header FROM runs").fetchone()
        old = {k: v for k, v in json.loads(header).items() if k != "definition"}
        conn.execute("UPDATE runs SET header = ?", (json.dumps(old),))
        conn.execute("DELETE FROM definitions")
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(effects))
    monkeypatch.setenv("LOOPSTATE_DB", str(db))
    agent = deploy_agents.v2_added().clone(store=SQLiteStore(db))
    assert (await agent.check_run("run-1")).verdict == "compatible"
    done = await agent.resume("run-1", decisions={"call_1_1": Approve()})
    assert (done.status, done.output) == ("done", "Refunded.")
    state = await SQLiteStore(db).load("run-1")
    assert state.definition == agent.definition.fingerprint
    assert [r.before for r in state.redefinitions] == [None]


def test_a_served_worker_skips_an_incompatible_run_and_the_api_lists_it(
    tmp_path: Path, effects: Path
) -> None:
    """`loopstate serve` (its worker claims ready runs) under v2: the compatible run goes on,
    the v1 run is migrated (its old-form approval dropped: it waits again), the v0 run is
    skipped with the reason logged, not failed; `?compatible=false` lists it, and why."""
    db = tmp_path / "runs.db"
    start(db, effects, "run-a=v2_pre", "run-b=v1", "run-c=v0", approve=True)
    log = tmp_path / "serve.log"
    server = start_server(db, effects, log, agent="deploy_agents:v2")
    try:
        with server.client() as client:
            wait_for(lambda: "worker_run_incompatible" in log.read_text())
            wait_for(lambda: _status(client, "run-a") == "done")
            wait_for(lambda: _status(client, "run-b") == "awaiting_approval")
            refused = client.get("/api/runs", params={"compatible": "false"}).json()["items"]
            taken = client.get("/api/runs", params={"compatible": "true"}).json()["items"]
        marked = inbox_marks(server.url)
    finally:
        stop(server)
    assert [(r["run_id"], r["status"], r["verdict"]) for r in refused] == [
        ("run-c", "awaiting_approval", "incompatible")
    ]
    assert refused[0]["why"] == [
        "run run-c needs the tools refund for its pending calls and this agent lacks refund"
    ]
    assert [(r["run_id"], r["verdict"]) for r in taken] == [("run-b", "compatible")]
    line = next(x for x in log.read_text().splitlines() if "worker_run_incompatible" in x)
    assert "run-c" in line
    assert "lacks refund" in line
    assert effects.read_text().splitlines() == ["run-a call_1_1 issued refund for A1"]
    assert marked == [("run-c", f"run run-c cannot resume under the agent served here "
                       f"(incompatible): {refused[0]['why'][0]}")]  # fmt: skip


def inbox_marks(url: str) -> list[tuple[str, str]]:
    """The runs the inbox marks as incompatible, read in a real Chromium (Debian's)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
        )
        page = browser.new_page()
        page.goto(f"{url}/ui/?token={TOKEN}")
        page.wait_for_selector("ul.incompatible li", state="attached")
        items = page.locator("ul.incompatible li")
        marks = [
            (items.nth(i).get_attribute("data-run") or "", items.nth(i).inner_text())
            for i in range(items.count())
        ]
        browser.close()
    return marks


def _status(client: httpx.Client, run_id: str) -> str:
    return str(client.get(f"/api/runs/{run_id}").json()["status"])
