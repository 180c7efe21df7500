"""The one decision checker (`check_decision`): each refusal is its own `DecisionError`
subclass, carries the fields at fault, and is the same whichever door a decision comes in by
(the Python API, a decision queued on the stored run, HTTP's status table)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loopstate import Agent, Approve, MemoryStore, RunResult, ScriptedModel, tool
from loopstate.engine.approval import Deny, Edit, Result
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import (
    AlreadyDecided,
    DecisionError,
    FieldError,
    InvalidDecision,
    NotADecision,
    NotAllowed,
    NotAwaiting,
    RunNotResumable,
    StaleDigest,
    UnknownCall,
)
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import RunState
from loopstate.service.decisions import as_problem


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge an amount in cents."""
    return f"charged {amount}"


@tool(external=True)
def ask(question: str) -> int:
    """Ask a person; they answer with a number."""
    raise AssertionError("an external tool's body never runs")


async def suspended() -> tuple[Agent, RunResult, RunState]:
    model = ScriptedModel(
        [calls(call("charge", {"amount": 5}), call("ask", {"question": "how many?"})), "ok"]
    )
    agent = Agent(model, [charge, ask], store=MemoryStore())
    result = await agent.run("go")
    assert result.status == "awaiting_approval"
    return agent, result, await agent.store.load(result.run_id)


REFUSALS = {
    "not-a-decision": ("c", lambda d: {"kind": "maybe"}, NotADecision, 422, ()),
    "unknown-call": ("nope", lambda d: Approve(digest=d), UnknownCall, 404, ()),
    "stale-digest": ("c", lambda d: Approve(digest="0" * 16), StaleDigest, 409, ()),
    "no-digest": ("c", lambda d: Approve(), InvalidDecision, 422, (("digest", "required"),)),
    "result-for-a-gated-call": ("c", lambda d: Result(3, digest=d), NotAllowed, 409, ()),
    "approve-an-external-call": ("a", lambda d: Approve(digest=d), NotAllowed, 409, ()),
    "edit-of-a-wrong-type": ("c", lambda d: Edit({"amount": "x"}, digest=d), InvalidDecision,
                             422, (("amount", "'x' is not of type 'integer'"),)),
    "edit-missing-an-argument": ("c", lambda d: Edit({}, digest=d), InvalidDecision, 422,
                                 (("amount", "'amount' is a required property"),)),
    "result-of-a-wrong-type": ("a", lambda d: Result("many", digest=d), InvalidDecision, 422,
                               (("value", "'many' is not of type 'integer'"),)),
}  # fmt: skip


@pytest.mark.parametrize(
    ("who", "decide", "refusal", "status", "fields"), REFUSALS.values(), ids=REFUSALS.keys()
)
async def test_each_refusal_is_typed_names_its_fields_and_has_one_http_status(
    who: str,
    decide: Callable[[str], object],
    refusal: type[DecisionError],
    status: int,
    fields: tuple[tuple[str, str], ...],
) -> None:
    """A decision as HTTP records it: bound to a digest, no tools at hand (stored schemas)."""
    _, result, state = await suspended()
    call_id = {r.tool[0]: r.call_id for r in result.pending}.get(who, who)
    digest = next((r.digest for r in result.pending if r.call_id == call_id), "")
    with pytest.raises(refusal) as refused:
        check_decision(state, call_id, decide(digest), bound=True)
    assert refused.value.errors == tuple(FieldError(*f) for f in fields)
    problem = as_problem(refused.value)
    shown = [{"field": f, "message": m} for f, m in fields]
    assert (problem.status, problem.extra.get("errors", [])) == (status, shown)


async def test_a_decision_is_refused_the_same_way_by_every_door() -> None:
    """The Python API and a decision queued on the stored run (the CLI's, HTTP's) refuse
    alike, and the stored run is unchanged."""
    agent, result, state = await suspended()
    charge_id = next(r.call_id for r in result.pending if r.tool == "charge")
    for decision, refusal in [(Approve(digest="0" * 16), StaleDigest), (Result(1), NotAllowed)]:
        with pytest.raises(refusal) as by_api:
            await agent.resume(result.run_id, {charge_id: decision})
        with pytest.raises(refusal) as by_queue:
            await queue_decision(agent.store, result.run_id, charge_id, decision, actor="cli")
        assert str(by_api.value) == str(by_queue.value)
    assert await agent.store.load(result.run_id) == state


async def test_a_second_decision_and_a_run_that_waits_for_none_are_refused() -> None:
    agent, result, _ = await suspended()
    charge_id = next(r.call_id for r in result.pending if r.tool == "charge")
    queued = await queue_decision(agent.store, result.run_id, charge_id, Deny("no"), actor="cli")
    with pytest.raises(AlreadyDecided, match="is already decided; a decision is used once"):
        check_decision(queued, charge_id, Approve())
    ended = await agent.abort(result.run_id, "stop")
    ask_id = next(r.call_id for r in result.pending if r.tool == "ask")
    with pytest.raises(NotAwaiting, match="is aborted, not awaiting a result") as refused:
        check_decision(await agent.store.load(ended.run_id), ask_id, Result(1))
    assert isinstance(refused.value, RunNotResumable)  # what it was before it had a class
    assert as_problem(refused.value).status == 409


async def test_with_the_tool_at_hand_an_edit_is_checked_by_its_own_model() -> None:
    _, result, state = await suspended()
    charge_id = next(r.call_id for r in result.pending if r.tool == "charge")
    tools = {"charge": charge, "ask": ask}
    with pytest.raises(InvalidDecision) as refused:
        check_decision(state, charge_id, Edit({"amount": "x"}), tools=tools)
    assert [f.field for f in refused.value.errors] == ["amount"]
    assert "valid integer" in refused.value.errors[0].message  # pydantic's words, not jsonschema's
    checked = check_decision(state, charge_id, Edit({"amount": 7}), tools=tools)
    assert (checked.call.call_id, checked.decision) == (charge_id, Edit({"amount": 7}))


def test_every_kind_of_refusal_has_its_http_status() -> None:
    from loopstate.engine import errors
    from loopstate.service.decisions import STATUS

    kinds = {
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, DecisionError)
    }
    assert kinds - set(STATUS) == set()
