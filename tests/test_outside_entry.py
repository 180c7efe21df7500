"""The one entry rule for outside data (issue 26, `engine/outside.py`), the same for the
Python API and the CLI as for HTTP: text with lone surrogates is made storable (so an accepted
decision can never fail later to store), and an external result must be storable JSON —
finite, at most 64 levels deep, bounded — or it is refused naming the field, nothing recorded."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from support import forking

from loopstate import Agent, Deny, ScriptedModel, tool
from loopstate.engine.approval import as_decision, as_result
from loopstate.engine.errors import DecisionError
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.outside import MAX_VALUE_CHARS, OutsideError, outside_json
from loopstate.engine.stores.sqlite import SQLiteStore

LONE = "\ud800"


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge a card."""
    return f"charged {amount}"


@tool(external=True)
def fetch_data(query: str) -> dict[str, Any]:
    """Data fetched by a client."""
    raise AssertionError("never runs")


def agent(db: Path) -> Agent:
    script = [calls(call("charge", {"amount": 5}), call("fetch_data", {"query": "q"})), "done"]
    return Agent(
        ScriptedModel(script, by_step=True),
        [charge, fetch_data],
        store=SQLiteStore(db),
        ids=lambda: "run-1",
    )


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"x": float("nan")}, "value.x"),
        ({"x": [float("inf")]}, "value.x.0"),
        ({"x": [[[]]] * 2, "y": float("-inf")}, "value.y"),
        ({"deep": eval("[" * 64 + "]" * 64)}, "value.deep" + ".0" * 63),
        ({"big": "x" * MAX_VALUE_CHARS}, "value"),
        ({"odd": {1, 2}}, "value.odd"),
    ],
    ids=["nan", "infinity", "minus-infinity", "65-deep", "too-large", "not-json"],
)
def test_an_outside_value_that_is_not_storable_json_is_refused_naming_the_field(
    value: Any, field: str
) -> None:
    with pytest.raises(OutsideError) as refused:
        outside_json(value)
    assert refused.value.field == field
    with pytest.raises(DecisionError, match="result refused"):
        as_result(value)
    with pytest.raises(DecisionError):
        as_decision({"kind": "result", "value": value})


def test_outside_text_is_made_storable_in_every_decision_form() -> None:
    denied = as_decision({"kind": "deny", "reason": f"r{LONE}", "message": f"m{LONE}"})
    assert isinstance(denied, Deny)
    assert (denied.reason, denied.message) == ("r\ufffd", "m\ufffd")
    assert as_decision(Deny(f"x{LONE}")).reason == "x\ufffd"
    rule = {"name": f"n{LONE}", "decision": "approve", "tools": [f"t{LONE}"]}
    approved = as_decision({"kind": "approve", "remember": rule})
    assert approved.model_dump_json()  # storable: it encodes
    edited = as_decision({"kind": "edit", "arguments": {f"k{LONE}": [f"v{LONE}"]}})
    assert edited.model_dump_json() == (
        '{"kind":"edit","digest":null,"by":null,"arguments":{"k\ufffd":["v\ufffd"]},"data":{}}'
    )


async def test_the_python_api_takes_hostile_text_and_refuses_a_nan_result(tmp_path: Path) -> None:
    runner = agent(tmp_path / "runs.db")
    waiting = await runner.run(f"pay{LONE}")
    assert waiting.status == "awaiting_approval"
    pending = {p.tool: p.call_id for p in waiting.pending}
    with pytest.raises(DecisionError, match=r"value\.x"):
        await runner.resume("run-1", results={pending["fetch_data"]: {"x": float("nan")}})
    assert (await runner.store.load("run-1")).status == "awaiting_approval"  # nothing recorded
    result = await runner.resume(
        "run-1",
        decisions={pending["charge"]: {"kind": "deny", "reason": f"no{LONE}"}},
        results={pending["fetch_data"]: {"note": f"n{LONE}"}},
    )
    assert result.status == "done", result.error
    stored = await SQLiteStore(tmp_path / "runs.db").load("run-1")
    assert stored.messages[0].content == "pay\ufffd"
    assert stored.messages == result.messages


def test_the_cli_takes_a_reason_that_is_not_utf8_and_the_run_finishes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    runner = agent(db)
    waiting = asyncio.run(runner.run("pay"))
    charge_id = next(p.call_id for p in waiting.pending if p.tool == "charge")
    out = forking.run(
        [sys.executable, "-m", "loopstate", "deny", "run-1", charge_id, "--reason", b"no\xff",
         "--db", str(db)],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    fetch_id = next(p.call_id for p in waiting.pending if p.tool == "fetch_data")
    result = asyncio.run(runner.resume("run-1", results={fetch_id: {"rows": 1}}))
    assert result.status == "done", result.error
    stored = asyncio.run(SQLiteStore(db).load("run-1"))
    charge_call = next(c for c in stored.calls if c.tool == "charge")
    assert charge_call.decision is not None
    assert charge_call.decision.model_dump()["reason"] == "no\ufffd"
