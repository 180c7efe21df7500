"""An external tool inside a flow phase: the flow suspends durably at the call, the result is
supplied (by `Flow.resume(results=...)`, or by `loopstate result` in another process on one
SQLite file), the phase's model sees it, and the flow moves on through its gate."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from statemachine import State
from support import forking

from loopstate import DecisionError, ScriptedModel, SQLiteStore
from loopstate.engine.models.scripted import call
from loopstate.machines.flows import Flow, FlowMachine, Phase
from loopstate.tools.human import ask_person


class Ship(BaseModel):
    """Whether to ship, as the person said."""

    ship: bool


class Release(FlowMachine):
    confirm = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = confirm.to(done, cond="decided")
    fail = failed.from_(confirm)
    abort = aborted.from_(confirm)

    def decided(self, data: dict[str, Any]) -> bool:
        return "confirm" in data


def release(model: ScriptedModel, db: Path) -> Flow:
    phases = {"confirm": Phase(tools=[ask_person], output=Ship, instructions="Ask, then submit.")}
    return Flow(Release, phases, models={"default": model}, store=SQLiteStore(db))


def script() -> ScriptedModel:
    return ScriptedModel(
        [call("ask_person", {"question": "ship v2?"}), call("submit_confirm", {"ship": True})],
        by_step=True,
    )


async def test_a_flow_phase_waits_for_an_external_result_and_goes_on_with_it(
    tmp_path: Path,
) -> None:
    model = script()
    flow = release(model, tmp_path / "runs.db")
    first = await flow.run("release v2")
    assert (first.status, first.phase) == ("awaiting_approval", "confirm")
    (pending,) = first.pending
    assert (pending.tool, pending.external) == ("ask_person", True)
    with pytest.raises(DecisionError, match="refused"):
        await flow.resume(first.run_id, results={pending.call_id: 42})
    done = await flow.resume(first.run_id, results={pending.call_id: "yes, ship it"})
    assert (done.status, done.phase, done.data["confirm"]) == ("done", "done", {"ship": True})
    assert model.requests[1].messages[-1].content == "yes, ship it"


async def test_the_cli_in_another_process_answers_a_flow_phase(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = await release(script(), db).run("release v2")
    (pending,) = first.pending
    answered = forking.run(
        [sys.executable, "-m", "loopstate", "result", first.run_id, pending.call_id,
         "--value", json.dumps("go ahead")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "LOOPSTATE_DB": str(db)}, cwd=tmp_path,
    )  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    model = script()  # a new process's model: by_step continues where the run is
    done = await release(model, db).resume(first.run_id)
    assert (done.status, done.data["confirm"]) == ("done", {"ship": True})
    assert model.requests[0].messages[-1].content == "go ahead"
