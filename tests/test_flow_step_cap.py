"""`Flow(max_steps=...)`: one cap on the model calls of the whole run, over all its phases (a
phase's own `max_steps` counts one turn); the flow ends `failed` with stop reason `max_steps`,
naming the phase and the counts, and no model call is made past it. Agent phases' child runs
(and their sub-agents) count: their model calls are the flow's. `Flow(budget=...)` keeps a
budget as an agent does, across phases."""

from __future__ import annotations

from typing import Any

import pytest
from statemachine import State

from loopstate import (
    Agent,
    Budget,
    DefinitionError,
    MemoryStore,
    RunNotResumable,
    ScriptedModel,
    tool,
)
from loopstate.engine.models.scripted import call
from loopstate.machines.flows import Flow, FlowMachine, Phase


class Report(FlowMachine):
    research = State(initial=True)
    write = State()
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = research.to(write, cond="always") | write.to(done, cond="always")
    fail = failed.from_(research, write)
    abort = aborted.from_(research, write)

    def always(self, data: dict[str, Any]) -> bool:
        return True


@tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted {text}"


def script() -> ScriptedModel:
    """Research: two notes and an answer (3 calls); write: a note and an answer (2 calls)."""
    return ScriptedModel(
        [call("note", {"text": "a"}), call("note", {"text": "b"}), "Researched.",
         call("note", {"text": "c"}), "Written."]
    )  # fmt: skip


def report(model: ScriptedModel, **options: Any) -> Flow:
    phases = {"research": Phase(tools=[note]), "write": Phase(tools=[note])}
    return Flow(Report, phases, model=model, store=MemoryStore(), **options)


async def test_a_flow_wide_step_cap_ends_the_flow_in_the_phase_that_reaches_it() -> None:
    model = script()
    result = await report(model, max_steps=4).run("write a report")
    assert (result.status, result.phase, result.stop_reason) == ("failed", "failed", "max_steps")
    assert result.error == (
        "the flow's max_steps (4) reached in phase 'write': 4 model calls, 4 in the flow's own "
        "phases and 0 in its agent phases' runs"
    )
    assert len(model.requests) == 4  # the fifth call, past the cap, was not made
    assert result.steps == 4


async def test_without_the_cap_the_same_flow_runs_to_its_end() -> None:
    model = script()
    result = await report(model).run("write a report")
    assert (result.status, result.phase, result.steps) == ("done", "done", 5)


async def test_a_cap_reached_mid_turn_stops_the_turn_after_its_batch() -> None:
    model = script()
    result = await report(model, max_steps=2).run("write a report")
    assert (result.status, result.stop_reason) == ("failed", "max_steps")
    assert result.error is not None
    assert result.error.startswith("the flow's max_steps (2) reached in phase 'research': 2 ")
    assert len(model.requests) == 2


def test_a_cap_below_one_is_refused_when_the_flow_is_built() -> None:
    with pytest.raises(DefinitionError, match="max_steps must be at least 1"):
        report(script(), max_steps=0)


async def test_a_flow_budget_stops_the_run_and_a_raised_one_goes_on_across_phases() -> None:
    model = script()
    flow = report(model, budget=Budget(model_calls=2))
    stopped = await flow.run("write a report")
    assert (stopped.status, stopped.phase, len(model.requests)) == ("failed", "research", 2)
    assert stopped.failure is not None
    assert stopped.failure.budget is not None
    assert stopped.failure.budget.limit == "model_calls"
    done = await flow.resume(stopped.run_id, budget=Budget(model_calls=10))
    assert (done.status, done.phase, done.steps) == ("done", "done", 5)


def researcher(model: ScriptedModel, store: MemoryStore) -> Agent:
    """An agent for the research phase: two notes and an answer (3 calls)."""
    return Agent(model, [note], store=store)


def with_agent_phase(**options: Any) -> tuple[Flow, ScriptedModel, ScriptedModel]:
    store = MemoryStore()
    child_model = ScriptedModel(
        [call("note", {"text": "a"}), call("note", {"text": "b"}), "Researched."]
    )
    flow_model = ScriptedModel([call("note", {"text": "c"}), "Written."])
    phases = {
        "research": Phase(agent=researcher(child_model, store), task="research it"),
        "write": Phase(tools=[note]),
    }
    flow = Flow(Report, phases, model=flow_model, store=store, **options)
    return flow, child_model, flow_model


async def test_an_agent_phases_child_run_counts_toward_the_flows_cap() -> None:
    flow, child_model, flow_model = with_agent_phase(max_steps=4)
    result = await flow.run("write a report")
    assert (result.status, result.stop_reason) == ("failed", "max_steps")
    assert result.error == (
        "the flow's max_steps (4) reached in phase 'write': 4 model calls, 1 in the flow's own "
        "phases and 3 in its agent phases' runs"
    )
    assert (len(child_model.requests), len(flow_model.requests)) == (3, 1)


async def test_an_agent_phases_child_run_stops_at_what_the_cap_leaves_it() -> None:
    flow, child_model, flow_model = with_agent_phase(max_steps=2)
    result = await flow.run("write a report")
    assert (result.status, result.phase, result.stop_reason) == ("failed", "failed", "max_steps")
    assert result.error == (
        "the flow's max_steps (2) reached in phase 'research': 2 model calls, 0 in the flow's "
        "own phases and 2 in its agent phases' runs"
    )
    assert (len(child_model.requests), len(flow_model.requests)) == (2, 0)
    stored = await flow.store.load(result.run_id)
    assert stored.flow is not None
    (child,) = stored.flow.children
    assert (await flow.store.load(child)).stop_reason == "max_steps"


async def test_a_cap_the_child_runs_do_not_reach_lets_the_flow_finish() -> None:
    flow, child_model, flow_model = with_agent_phase(max_steps=5)
    result = await flow.run("write a report")
    assert (result.status, result.phase) == ("done", "done")
    assert (len(child_model.requests), len(flow_model.requests)) == (3, 2)


async def test_a_sub_agent_of_an_agent_phase_counts_toward_the_flows_cap() -> None:
    store = MemoryStore()
    helper = Agent(ScriptedModel([call("note", {"text": "a"}), "Found."]), [note], store=store)
    lead_model = ScriptedModel([call("helper", {"task": "find"}), "Researched."])
    tools = [helper.as_tool(name="helper", description="Finds things.")]
    phases = {
        "research": Phase(agent=Agent(lead_model, tools, store=store), task="research it"),
        "write": Phase(tools=[note]),
    }
    flow_model = ScriptedModel([call("note", {"text": "c"}), "Written."])
    flow = Flow(Report, phases, model=flow_model, store=store, max_steps=5)
    result = await flow.run("write a report")
    assert result.error == (
        "the flow's max_steps (5) reached in phase 'write': 5 model calls, 1 in the flow's own "
        "phases and 4 in its agent phases' runs"
    )
    assert len(flow_model.requests) == 1


async def test_a_flow_budget_counts_its_agent_phases_run_and_a_raised_one_continues_it() -> None:
    flow, child_model, flow_model = with_agent_phase(budget=Budget(model_calls=2))
    stopped = await flow.run("write a report")
    assert (stopped.status, stopped.phase, len(child_model.requests)) == ("failed", "research", 2)
    assert stopped.failure is not None
    assert stopped.failure.budget is not None
    assert (stopped.failure.budget.limit, stopped.failure.budget.spent.model_calls) == (
        "model_calls", 2,
    )  # fmt: skip
    stored = await flow.store.load(stopped.run_id)
    assert stored.state == "budget_exceeded"  # resting, as the phase's run does
    with pytest.raises(RunNotResumable, match="still over its budget"):
        await flow.resume(stopped.run_id, budget=Budget(model_calls=2))
    assert (await flow.store.load(stopped.run_id)).state == "budget_exceeded"  # unchanged
    done = await flow.resume(stopped.run_id, budget=Budget(model_calls=10))
    assert (done.status, done.phase) == ("done", "done")
    assert (len(child_model.requests), len(flow_model.requests)) == (3, 2)
    assert stored.flow is not None
    (child,) = stored.flow.children  # the same run went on: no second one
    assert (await flow.store.load(child)).budget == Budget(model_calls=10)
