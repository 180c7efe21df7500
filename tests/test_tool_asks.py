"""`await ctx.ask(question, schema=...)` inside a tool's body: the run suspends like an external
call, the answer comes from anywhere (here the CLI in another process), and the body runs
again from the start with the same `ask` returning the recorded answer at once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support import forking

from loopstate import (
    Agent,
    DecisionError,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    ToolContext,
    tool,
)
from loopstate.engine.errors import DefinitionError
from loopstate.engine.models.scripted import call


def deploy_tool(log: Path):
    @tool(asks=True)
    async def deploy(env: str, ctx: ToolContext[None]) -> str:
        """Deploy the service to an environment, once a person agrees."""
        with log.open("a") as f:
            f.write("before\n")
        answer = await ctx.ask(f"deploy to {env}?", schema=int)
        with log.open("a") as f:
            f.write(f"after {answer}\n")
        return f"deployed {env} with {answer} replicas"

    return deploy


def agent(db: Path, log: Path, model: ScriptedModel) -> Agent:
    return Agent(model, [deploy_tool(log)], store=SQLiteStore(db), ids=lambda: "run-1")


async def test_an_ask_answered_by_the_cli_in_another_process_reruns_the_body_once(
    tmp_path: Path,
) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "body.log"
    model = ScriptedModel([call("deploy", {"env": "prod"}), "Deployed."])
    first = await agent(db, log, model).run("ship it")
    (pending,) = first.pending
    assert (first.status, pending.reason, pending.external) == (
        "awaiting_approval", "deploy to prod?", True)  # fmt: skip
    env = {**os.environ, "LOOPSTATE_DB": str(db)}
    cli = [sys.executable, "-m", "loopstate", "result", "run-1", pending.call_id, "--value"]
    bad = forking.run([*cli, json.dumps("three")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert (bad.returncode, "refused" in bad.stderr) == (2, True)
    assert "Traceback" not in bad.stderr
    good = forking.run([*cli, "3"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60)  # fmt: skip
    assert good.returncode == 0, good.stderr
    done = await agent(db, log, model).resume("run-1")
    assert (done.status, done.output) == ("done", "Deployed.")
    assert log.read_text().splitlines() == ["before", "before", "after 3"]
    asked = [t.event for t in done.transitions if t.target == "awaiting_approval"]
    assert asked == ["reapprove"]  # the question was put once
    assert model.requests[1].messages[-1].content == "deployed prod with 3 replicas"


async def test_an_answer_that_does_not_fit_the_schema_is_refused(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "body.log"
    model = ScriptedModel([call("deploy", {"env": "dev"}), "ok"])
    first = await agent(db, log, model).run("go")
    call_id = first.pending[0].call_id
    with pytest.raises(DecisionError, match="refused"):
        await agent(db, log, model).resume("run-1", results={call_id: "many"})
    done = await agent(db, log, model).resume("run-1", results={call_id: 2})
    assert done.status == "done"


async def test_a_tool_that_asks_without_declaring_it_gets_an_error_result() -> None:
    @tool
    async def sneaky(ctx: ToolContext[None]) -> str:
        """Asks without saying so."""
        return str(await ctx.ask("may I?"))

    model = ScriptedModel([call("sneaky", {}), "fine"])
    done = await Agent(model, [sneaky], store=MemoryStore()).run("go")
    assert done.status == "done"
    assert "not declared @tool(asks=True)" in model.requests[1].messages[-1].content


def test_asks_needs_an_async_tool() -> None:
    def sync_body(ctx: ToolContext[None]) -> str:
        """Cannot await."""
        return ""

    with pytest.raises(DefinitionError, match="asks=True needs an async function"):
        tool(asks=True)(sync_body)
