"""A runner keeps its lease for as long as it works: a tool that outlives the lease's length
does not let a second process take the run over while the first one lives."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import forking
from support.waiting import until

from loopstate import Agent, RunBusy, ScriptedModel
from loopstate.engine.stores.sqlite import SQLiteStore

CHILD = Path(__file__).with_name("lease_child.py")


async def test_a_tool_longer_than_the_lease_keeps_other_processes_out(tmp_path: Path) -> None:
    db, log, release = tmp_path / "runs.db", tmp_path / "tool.log", tmp_path / "release"
    child = forking.Popen(
        [sys.executable, str(CHILD), str(db), str(log), "--lease", "0.6", "--release",
         str(release)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        await until(lambda: log.exists() and "started" in log.read_text())  # in its tool
        await asyncio.sleep(1.2)  # twice the lease: only renewal keeps it
        intruder = Agent(ScriptedModel(["stolen"]), store=SQLiteStore(db))
        with pytest.raises(RunBusy, match="run run-1 is busy"):
            await intruder.resume("run-1")
        release.touch()  # the tool ends only now: it outlived the lease, however slow we were
        out, _ = child.communicate(timeout=300)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0
    assert json.loads(out) == {"status": "done", "output": "Charged."}
    assert log.read_text().count("started") == 1
    stored = await SQLiteStore(db).load("run-1")
    assert (stored.status, stored.calls[0].status) == ("done", "succeeded")
