"""How a resume classifies the changes between a run's definition and the resuming agent's:
compatible ones go on and are recorded (or are refused, as `on_change` says), incompatible
ones raise `IncompatibleRun` with one line each and change nothing; a migration that returns
an invalid run is refused; a decision made for a migrated call's old form is refused."""

from __future__ import annotations

from typing import Any

import pytest
from statemachine import State

from loopstate import (
    Agent,
    Approve,
    DefinitionError,
    Flow,
    IncompatibleRun,
    MemoryStore,
    Migration,
    Phase,
    RunState,
    ScriptedModel,
    tool,
)
from loopstate.engine.errors import StaleDigest
from loopstate.engine.models.scripted import call
from loopstate.machines.flows import FlowMachine


@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool(needs_approval=True)
def refund_v2(order: str) -> str:
    """Refund an order, kindly."""
    return f"refunded {order}"


@tool(needs_approval=True)
def refund_strict(order: int) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def refund_ungated(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid"


def shop(store: MemoryStore, *tools: Any, model: str = "shop-model", **options: Any) -> Agent:
    script = ScriptedModel([call("refund", {"order": "A1"}), "Refunded."], by_step=True, name=model)
    return Agent(script, list(tools) or [refund, lookup], store=store, ids=lambda: "run-1",
                 instructions="You run the shop.", **options)  # fmt: skip


def named(t: Any, name: str) -> Any:
    """The tool `t` under another name (a later deploy's version of `name`)."""
    from dataclasses import replace

    return replace(t, name=name)


async def suspended() -> MemoryStore:
    store = MemoryStore()
    assert (await shop(store).run("refund A1")).status == "awaiting_approval"
    return store


async def test_a_reworded_description_goes_on_and_is_recorded() -> None:
    store = await suspended()
    done = await shop(store, named(refund_v2, "refund"), lookup).resume(
        "run-1", decisions={"call_1_1": Approve()}
    )
    assert done.status == "done"
    (record,) = (await store.load("run-1")).redefinitions
    assert record.changes == ("tool refund's description changed",)


async def test_on_change_refuses_a_model_change_and_nothing_changes() -> None:
    store = await suspended()
    before = await store.load("run-1")
    strict = shop(store, model="other-model", on_change={"model": "refuse"})
    with pytest.raises(IncompatibleRun) as refused:
        await strict.resume("run-1", decisions={"call_1_1": Approve()})
    assert refused.value.differences == (
        "model shop-model → other-model (on_change refuses model)",
    )
    assert await store.load("run-1") == before
    assert (await shop(store, model="other-model").check_run("run-1")).verdict == "compatible"


@pytest.mark.parametrize(
    ("tools", "line"),
    [
        ((named(refund_strict, "refund"), lookup),
         "tool refund's schema changed and no longer accepts the arguments of calls call_1_1"),
        ((named(refund_ungated, "refund"), lookup),
         "tool refund's gate always → never while calls call_1_1 wait on it"),
    ],
)  # fmt: skip
async def test_a_change_the_pending_call_cannot_take_is_refused(
    tools: tuple[Any, ...], line: str
) -> None:
    store = await suspended()
    before = await store.load("run-1")
    with pytest.raises(IncompatibleRun) as refused:
        await shop(store, *tools).resume("run-1")
    assert line in refused.value.differences
    assert await store.load("run-1") == before


def _rename(run: RunState) -> RunState:
    (c,) = run.batch
    return run.replace_call(c.model_copy(update={"tool": "issue_refund"}))


def _rewrite_history(run: RunState) -> RunState:
    return run.evolve(messages=run.messages[:1])


async def test_a_migration_that_rewrites_history_is_refused_and_the_run_left_as_it_was() -> None:
    store = await suspended()
    before = await store.load("run-1")
    fingerprint = before.definition or ""
    bad = shop(store, named(refund, "issue_refund"), lookup,
               migrations=[Migration(from_=fingerprint, apply=_rewrite_history)])  # fmt: skip
    with pytest.raises(IncompatibleRun, match="migration _rewrite_history refused: it changed"):
        await bad.resume("run-1")
    assert await store.load("run-1") == before


async def test_a_decision_for_a_migrated_calls_old_form_is_refused() -> None:
    store = await suspended()
    stored = await store.load("run-1")
    old = stored.batch[0]
    migration = Migration(from_=stored.definition or "", apply=_rename)
    v2 = shop(store, named(refund, "issue_refund"), lookup, migrations=[migration])
    with pytest.raises(StaleDigest, match="call call_1_1 was migrated by _rename"):
        await v2.resume("run-1", decisions={"call_1_1": Approve(digest=old.digest)})
    assert (await store.load("run-1")).batch[0] == old
    judged = await v2.check_run("run-1")
    new = judged.state.batch[0]
    assert (judged.verdict, new.tool) == ("migrates", "issue_refund")
    assert new.digest != old.digest
    done = await v2.resume("run-1", decisions={"call_1_1": Approve(digest=new.digest)})
    assert (done.status, done.output) == ("done", "Refunded.")


def test_on_change_names_only_the_kinds_there_are() -> None:
    with pytest.raises(DefinitionError, match=r"on_change has unknown kinds \['modle'\]"):
        shop(MemoryStore(), on_change={"modle": "refuse"})
    with pytest.raises(DefinitionError, match="on_change answers are 'allow' or 'refuse'"):
        shop(MemoryStore(), on_change="maybe")  # type: ignore[arg-type]


class Desk(FlowMachine):
    ask = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = ask.to(done, cond="asked")
    fail = failed.from_(ask)
    abort = aborted.from_(ask)

    def asked(self, data: dict[str, Any]) -> bool:
        return "asked" in data


async def test_a_flow_run_records_its_definition_and_a_phase_tool_gone_is_refused() -> None:
    store = MemoryStore()

    def desk(*tools: Any) -> Flow:
        model = ScriptedModel([call("refund", {"order": "A1"}), "ok"], by_step=True)
        return Flow(Desk, {"ask": Phase(instructions="Help.", tools=list(tools))},
                    model=model, store=store, ids=lambda: "flow-1")  # fmt: skip

    first = desk(refund, lookup)
    assert (await first.run("refund A1")).status == "awaiting_approval"
    state = await store.load("flow-1")
    assert state.definition == first.definition.fingerprint
    assert [t.name for t in first.definition.tools] == ["ask/lookup", "ask/refund"]
    with pytest.raises(IncompatibleRun, match="phase ask of flow desk lacks refund"):
        await desk(lookup).resume("flow-1")
    assert await store.load("flow-1") == state


async def test_a_flow_run_is_migrated_by_the_flows_declared_migration() -> None:
    store = MemoryStore()

    def desk(tool_: Any, **options: Any) -> Flow:
        model = ScriptedModel([call(tool_.name, {"order": "A1"}), "ok"], by_step=True)
        return Flow(Desk, {"ask": Phase(instructions="Help.", tools=[tool_])}, model=model,
                    store=store, ids=lambda: "flow-1", **options)  # fmt: skip

    first = desk(refund, version="v1")
    assert (await first.run("refund A1")).status == "awaiting_approval"
    v2 = desk(named(refund, "issue_refund"), version="v2",
              migrations=[Migration(from_="v1", apply=_rename)])  # fmt: skip
    judged = await v2.check_run("flow-1")
    assert (judged.verdict, judged.migration, judged.rebound) == (
        "migrates",
        "_rename",
        ("call_1_1",),
    )
    digest = judged.state.batch[0].digest
    await v2.resume("flow-1", decisions={"call_1_1": Approve(digest=digest)})
    state = await store.load("flow-1")
    assert [(c.tool, c.status) for c in state.calls] == [("issue_refund", "succeeded")]
    assert state.definition == v2.definition.fingerprint


class Intake(FlowMachine):
    intake = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = intake.to(done, cond="asked")
    fail = failed.from_(intake)
    abort = aborted.from_(intake)

    def asked(self, data: dict[str, Any]) -> bool:
        return "asked" in data


async def test_a_run_in_a_state_the_new_machine_lacks_is_refused() -> None:
    store = MemoryStore()
    model = ScriptedModel([call("refund", {"order": "A1"}), "ok"], by_step=True)
    first = Flow(Desk, {"ask": Phase(instructions="Help.", tools=[refund])}, model=model,
                 store=store, ids=lambda: "flow-1")  # fmt: skip
    assert (await first.run("refund A1")).status == "awaiting_approval"
    before = await store.load("flow-1")
    renamed = Flow(Intake, {"intake": Phase(instructions="Help.", tools=[refund])}, model=model,
                   store=store, name="desk")  # fmt: skip
    with pytest.raises(IncompatibleRun) as refused:
        await renamed.resume("flow-1")
    assert "the run is in state 'ask', which Intake no longer has" in refused.value.differences
    assert await store.load("flow-1") == before
