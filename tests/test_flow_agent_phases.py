"""Pipelines: a flow phase runs an agent as an isolated child run with a typed output, and the
flow's code gates decide where the typed output goes next (the gauntlet example)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate import Abort, Agent, ApprovalRequest, Approve, MemoryStore, ScriptedModel
from loopstate.engine.errors import DefinitionError, RunNotResumable
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.tree import run_tree
from loopstate.machines.flows import Flow, Phase
from loopstate.machines.gauntlet import ROUNDS, Gauntlet, gauntlet_flow


def approve_all(requests: list[ApprovalRequest]) -> dict[str, Approve]:
    return {r.call_id: Approve() for r in requests}


def draft(path: str = "piece.md", text: str = "Tides follow the moon.") -> list[object]:
    return [
        call("write", {"path": path, "content": text}),
        call("submit_write", {"path": path, "summary": "why tides happen"}),
    ]


def review(approved: bool, notes: str = "", *, phase: str = "style_review") -> list[object]:
    verdict = {"approved": approved, "notes": notes}
    return [call("read", {"path": "piece.md"}), call(f"submit_{phase}", verdict)]


def facts(approved: bool, notes: str = "") -> list[object]:
    return review(approved, notes, phase="fact_review")


def team(writer: list[object], style: list[object], fact: list[object]) -> dict[str, ScriptedModel]:
    return {
        "writer": ScriptedModel(writer),  # type: ignore[arg-type]
        "style": ScriptedModel(style),  # type: ignore[arg-type]
        "facts": ScriptedModel(fact),  # type: ignore[arg-type]
    }


async def test_typed_outputs_land_in_the_data_and_the_gates_pass_the_draft_along(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    models = team(draft(), review(True), facts(True))
    flow = gauntlet_flow(models=models, workspace=tmp_path, store=store, approver=approve_all)
    result = await flow.run("Explain tides", data={"brief": "Explain tides"})
    assert (result.status, result.phase) == ("done", "done")
    assert result.data["draft"] == {"path": "piece.md", "summary": "why tides happen"}
    assert result.data["style_review"] == {"approved": True, "notes": ""}
    assert result.data["fact_review"]["approved"] is True
    assert (tmp_path / "piece.md").read_text() == "Tides follow the moon."
    phases = [(t.source, t.target) for t in result.transitions if t.event == "advance"]
    assert phases == [
        ("write", "style_review"),
        ("style_review", "fact_review"),
        ("fact_review", "done"),
    ]
    gate = next(t for t in result.transitions if t.event == "advance")
    assert gate.reason == "gate: drafted"
    assert all(m.remaining == 0 for m in models.values())


async def test_each_phase_is_a_child_run_linked_to_the_flow_with_only_its_own_tools(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    models = team(draft(), review(True), facts(True))
    flow = gauntlet_flow(models=models, workspace=tmp_path, store=store, approver=approve_all)
    result = await flow.run("Explain tides", data={"brief": "Explain tides"})
    stored = await store.load(result.run_id)
    assert stored.flow is not None
    children = [await store.load(c) for c in stored.flow.children]
    assert [c.parent.phase for c in children if c.parent] == [
        "write",
        "style_review",
        "fact_review",
    ]
    assert {c.parent.run_id for c in children if c.parent} == {result.run_id}
    assert [c.status for c in children] == ["done"] * 3
    # the writer's model saw its own tools only; a reviewer's, read and its output tool
    assert {t.name for t in models["writer"].requests[0].tools} == {"write", "submit_write"}
    assert {t.name for t in models["style"].requests[0].tools} == {"read", "submit_style_review"}
    assert "Explain tides" in models["style"].requests[0].messages[-1].content  # type: ignore[operator]
    tree = await run_tree(store, result.run_id)
    assert [child.state.run_id for _, child in tree.children] == list(stored.flow.children)


async def test_a_rejection_sends_the_draft_back_with_the_notes_and_a_new_child_run(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    models = team(
        [*draft(), *draft(text="Tides follow the moon and the sun.")],
        [*review(False, "mention the sun"), *review(True)],
        facts(True),
    )
    flow = gauntlet_flow(models=models, workspace=tmp_path, store=store, approver=approve_all)
    result = await flow.run("Explain tides", data={"brief": "Explain tides"})
    assert result.status == "done"
    assert result.data["round"] == 2
    stored = await store.load(result.run_id)
    assert stored.flow is not None
    assert len(stored.flow.children) == 5  # write, style, write, style, facts
    assert len(set(stored.flow.children)) == 5
    second_task = models["writer"].requests[2].messages[-1].content
    assert "mention the sun" in str(second_task)
    assert (tmp_path / "piece.md").read_text() == "Tides follow the moon and the sun."


async def test_a_draft_rejected_in_the_last_round_fails_the_flow_saying_which_phase(
    tmp_path: Path,
) -> None:
    models = team(draft() * ROUNDS, review(False, "no") * ROUNDS, [])
    flow = gauntlet_flow(
        models=models, workspace=tmp_path, store=MemoryStore(), approver=approve_all
    )
    result = await flow.run("Explain tides", data={"brief": "Explain tides"})
    assert (result.status, result.data["round"]) == ("failed", ROUNDS)
    assert result.error is not None
    assert "style_review" in result.error
    assert "none of its gates opened" in result.error


async def test_a_child_that_never_submits_its_output_fails_the_phase_clearly(
    tmp_path: Path,
) -> None:
    bad = [call("submit_write", {"path": 3})] * 3  # never a valid Draft
    models = team(bad, [], [])
    flow = gauntlet_flow(
        models=models, workspace=tmp_path, store=MemoryStore(), approver=approve_all
    )
    result = await flow.run("Explain tides", data={"brief": "Explain tides"})
    assert (result.status, result.phase) == ("failed", "failed")
    assert result.error is not None
    assert "phase 'write'" in result.error
    assert "without a valid Draft" in result.error


async def test_the_childs_approval_suspends_the_flow_and_a_decision_given_to_the_flow_reaches_it(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    models = team(draft(), review(True), facts(True))
    flow = gauntlet_flow(models=models, workspace=tmp_path, store=store)
    first = await flow.run("Explain tides", data={"brief": "Explain tides"})
    assert (first.status, first.phase) == ("awaiting_approval", "write")
    [pending] = first.pending
    assert pending.tool == "write"
    assert pending.run_id != first.run_id
    assert not (tmp_path / "piece.md").exists()
    with pytest.raises(RunNotResumable, match="resume that run"):
        await Agent(ScriptedModel([]), store=store).resume(pending.run_id or "")
    done = await flow.resume(first.run_id, decisions={pending.call_id: Approve()})
    assert done.status == "done"
    assert (tmp_path / "piece.md").exists()
    child = await store.load(pending.run_id or "")
    approved = next(c for c in child.calls if c.tool == "write")
    assert approved.decided_by == "resume"


async def test_aborting_the_flow_aborts_the_agent_phase_it_waits_for(tmp_path: Path) -> None:
    store = MemoryStore()
    flow = gauntlet_flow(models=team(draft(), [], []), workspace=tmp_path, store=store)
    first = await flow.run("Explain tides", data={"brief": "Explain tides"})
    ended = await flow.abort(first.run_id, "not today")
    assert ended.status == "aborted"
    child = await store.load(first.pending[0].run_id or "")
    assert child.status == "aborted"


async def test_an_abort_given_in_the_phases_run_aborts_the_flow_not_fails_it(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    flow = gauntlet_flow(models=team(draft(), [], []), workspace=tmp_path, store=store)
    first = await flow.run("Explain tides", data={"brief": "Explain tides"})
    [pending] = first.pending
    ended = await flow.resume(first.run_id, decisions={pending.call_id: Abort("wrong brief")})
    assert (ended.status, ended.error) == ("aborted", None)
    assert ended.stop_reason is not None
    assert "phase 'write'" in ended.stop_reason
    assert "aborted: wrong brief" in ended.stop_reason
    assert ended.transitions[-1].actor == "resume"
    assert (await store.load(pending.run_id or "")).status == "aborted"
    assert not (tmp_path / "piece.md").exists()
    assert await flow.pending(first.run_id) == []


async def test_the_flows_hooks_hear_the_phases_run_ask_for_approval(tmp_path: Path) -> None:
    from loopstate import Hooks

    class Notifier(Hooks):
        def __init__(self) -> None:
            self.asked: list[ApprovalRequest] = []
            self.runs: set[str] = set()

        async def on_approval_requested(self, requests) -> None:  # type: ignore[no-untyped-def]
            self.asked.extend(requests)

        async def on_event(self, event) -> None:  # type: ignore[no-untyped-def]
            self.runs.add(event.run_id)

    notifier = Notifier()
    flow = gauntlet_flow(models=team(draft(), [], []), workspace=tmp_path, store=MemoryStore())
    first = await flow.clone(hooks=[notifier]).run("Explain tides", data={"brief": "tides"})
    [pending] = first.pending
    assert [(r.tool, r.run_id) for r in notifier.asked] == [("write", pending.run_id)]
    assert notifier.runs == {first.run_id, pending.run_id}


def test_an_agent_phase_takes_its_model_and_tools_from_its_agent() -> None:
    agent = Agent(ScriptedModel([]), store=MemoryStore())
    with pytest.raises(DefinitionError, match="takes its tools from it"):
        Flow(
            Gauntlet,
            {
                "write": Phase(agent=agent, task="x", tools=[]),  # fine: empty
                "style_review": Phase(agent=agent, task="x", tools=[_tool()]),
                "fact_review": Phase(agent=agent, task="x"),
            },
        )
    with pytest.raises(DefinitionError, match="give it a task"):
        Flow(
            Gauntlet,
            {name: Phase(agent=agent) for name in ("write", "style_review", "fact_review")},
        )


def _tool() -> object:
    from loopstate.tools.builtin import read

    return read


async def test_the_flows_usage_rolls_up_its_phases_runs_by_phase(tmp_path: Path) -> None:
    from loopstate import Usage
    from loopstate.engine.models.scripted import Turn

    def priced(turns: list[object], tokens: int) -> list[object]:
        return [Turn(calls(t).reply, None, Usage(prompt_tokens=tokens)) for t in turns]  # type: ignore[arg-type]

    models = team(priced(draft(), 10), priced(review(True), 100), priced(facts(True), 1000))
    flow = gauntlet_flow(
        models=models, workspace=tmp_path, store=MemoryStore(), approver=approve_all
    )
    done = await flow.run("Explain tides", data={"brief": "Explain tides"})
    usage = await flow.usage(done.run_id)
    assert usage.own.prompt_tokens == 0  # the flow itself called no model
    assert usage.total.prompt_tokens == 2 * 10 + 2 * 100 + 2 * 1000
    assert {k: u.prompt_tokens for k, u in usage.by_agent.items()} == {
        "main": 0,
        "write": 20,
        "style_review": 200,
        "fact_review": 2000,
    }
    assert await flow.pending(done.run_id) == []
