"""Decisions arrive in their dict form from approvers and callers, and approvers may be
sync: both are accepted at the boundary, and anything else is refused clearly and early."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from loopstate import (
    Agent,
    ApprovalRequest,
    Approve,
    DecisionError,
    DefinitionError,
    Deny,
    ScriptedModel,
    tool,
)
from loopstate.engine.approval import BOOLEAN_DENIAL, as_approver, as_decision
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

ran: list[str] = []


@tool(needs_approval=True)
def send(to: str) -> str:
    """Send a mail."""
    ran.append(to)
    return f"sent to {to}"


def agent(tmp_path: Path, **options: Any) -> Agent:
    ran.clear()
    model = ScriptedModel([call("send", {"to": "ada"}, id="c1"), "finished"], by_step=True)
    return Agent(model, [send], store=SQLiteStore(tmp_path / "runs.db"), **options)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"kind": "approve"}, Approve()),
        ('{"kind": "deny", "reason": "no"}', Deny("no")),
        (Deny("no"), Deny("no")),
        (True, Approve()),
        (False, Deny(BOOLEAN_DENIAL)),
    ],
    ids=["dict", "json", "object", "true", "false"],
)
def test_a_decision_is_parsed_from_its_object_dict_or_json_form(value: Any, expected: Any) -> None:
    assert as_decision(value) == expected


@pytest.mark.parametrize(
    "value",
    [{"kind": "yes"}, {"kind": "deny", "why": "x"}, "approve", "true", 1, 0, None, object()],
)
def test_anything_else_is_refused_with_a_decision_error_saying_what_a_decision_is(
    value: object,
) -> None:
    with pytest.raises(DecisionError, match="Approve\\(\\), Deny\\(reason\\)"):
        as_decision(value)


async def test_resume_accepts_decisions_in_their_dict_form(tmp_path: Path) -> None:
    suspended = await agent(tmp_path).run("go")
    result = await agent(tmp_path).resume(suspended.run_id, decisions={"c1": {"kind": "approve"}})  # type: ignore[dict-item]
    assert result.status == "done"
    assert ran == ["ada"]


async def test_a_non_decision_at_resume_is_refused_and_the_run_is_unchanged(
    tmp_path: Path,
) -> None:
    suspended = await agent(tmp_path).run("go")
    with pytest.raises(DecisionError, match="is not a decision"):
        await agent(tmp_path).resume(suspended.run_id, decisions={"c1": object()})  # type: ignore[dict-item]
    stored = await SQLiteStore(tmp_path / "runs.db").load(suspended.run_id)
    assert stored.status == "awaiting_approval"
    assert ran == []


async def test_an_approver_may_answer_with_decisions_in_their_dict_form(tmp_path: Path) -> None:
    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Any]:
        return {r.call_id: {"kind": "deny", "reason": "not today"} for r in requests}

    result = await agent(tmp_path, approver=approver).run("go")
    assert result.status == "done"
    assert "not today" in result.messages[-2].content
    assert ran == []


async def test_an_approver_answering_true_or_false_as_seed_001s_does_decides(
    tmp_path: Path,
) -> None:
    def on_tool_approval(requests: list[ApprovalRequest]) -> dict[str, bool]:
        return {r.call_id: r.arguments["to"] == "ada" for r in requests}

    approved = await agent(tmp_path, approver=on_tool_approval).run("go")
    assert (approved.status, ran) == ("done", ["ada"])

    def refuse(requests: list[ApprovalRequest]) -> dict[str, bool]:
        return {r.call_id: False for r in requests}

    denied = await agent(tmp_path, approver=refuse).run("go")
    assert (denied.status, ran) == ("done", [])
    assert BOOLEAN_DENIAL in denied.messages[-2].content  # what the model was told
    call = (await SQLiteStore(tmp_path / "runs.db").load(denied.run_id)).calls[0]
    assert (call.status, call.decision) == ("denied", Deny(BOOLEAN_DENIAL))


async def test_resume_takes_a_boolean_decision(tmp_path: Path) -> None:
    suspended = await agent(tmp_path).run("go")
    result = await agent(tmp_path).resume(suspended.run_id, decisions={"c1": True})  # type: ignore[dict-item]
    assert (result.status, ran) == ("done", ["ada"])


async def test_a_sync_approver_is_adapted_and_decides(tmp_path: Path) -> None:
    def approver(requests: list[ApprovalRequest]) -> dict[str, Approve]:
        return {r.call_id: Approve(digest=r.digest) for r in requests}

    result = await agent(tmp_path, approver=approver).run("go")
    assert result.status == "done"
    assert ran == ["ada"]


def _two_arguments(requests: object, extra: object) -> None:
    raise AssertionError("never called")


@pytest.mark.parametrize(
    ("approver", "expected"),
    [("yes", "must be a function"), (_two_arguments, "must take exactly one argument")],
    ids=["not-callable", "wrong-arity"],
)
def test_an_unusable_approver_is_refused_when_the_agent_is_built(
    tmp_path: Path, approver: object, expected: str
) -> None:
    with pytest.raises(DefinitionError, match=expected):
        agent(tmp_path, approver=approver)
    with pytest.raises(DefinitionError, match=expected):
        as_approver(approver)
