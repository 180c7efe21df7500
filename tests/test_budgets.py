"""Budgets (`Agent(budget=Budget(...))`): checked before each model call and each batch of
tools; a run that would pass one rests in `budget_exceeded` (status `failed`, the limit and
the counts in `result.failure.budget`) with nothing in flight, and `resume(budget=...)` with a
raised limit goes on. Priced calls go over real HTTP to a model server (litellm prices
gpt-4o-mini); where only the model's words matter, a scripted model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from model_server import Reply, serve, text_reply, tool_call_reply
from support.cli import loopstate

from loopstate import (
    Agent,
    Budget,
    LiteLLMModel,
    MemoryStore,
    RunNotResumable,
    RunResult,
    ScriptedModel,
    SQLiteStore,
    Usage,
    tool,
)
from loopstate.engine.budget import Overrun
from loopstate.engine.models.scripted import Turn, call, calls, text

BIG = (100_000, 1_000)
"""Tokens of each priced call: at gpt-4o-mini's $0.15 / $0.60 per million, $0.0156 a call."""


def overrun_of(result: RunResult) -> Overrun:
    """The budget a failed run stopped at (the test fails if it did not stop at one)."""
    assert result.failure is not None
    assert result.failure.budget is not None
    return result.failure.budget


def counting_tools(ran: list[str]):
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return f"value of {key}"

    return [lookup]


def lookups(n: int) -> Reply:
    return dataclasses.replace(
        tool_call_reply((f"call_{n}", "lookup", {"key": f"k{n}"})), usage=BIG
    )


async def test_a_cost_budget_stops_before_the_call_that_would_pass_it_and_a_raised_one_finishes(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    with serve(lookups(1), lookups(2), lookups(3), text_reply("Done.", usage=BIG)) as server:
        model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.openai_base, api_key="k")
        store = SQLiteStore(tmp_path / "runs.db")
        agent = Agent(model, counting_tools(ran), store=store, budget=Budget(cost_usd=0.05))
        stopped = await agent.run("look three keys up")
        assert len(server.requests) == 3  # the fourth call would have passed $0.05: not made
        assert (stopped.status, ran) == ("failed", ["k1", "k2", "k3"])
        over = overrun_of(stopped)
        assert (over.limit, over.allowed, over.before) == ("cost_usd", 0.05, "model call")
        assert over.spent.cost_usd == pytest.approx(3 * 0.0156)
        assert over.spent.cost_usd + over.next > 0.05
        last = stopped.transitions[-1]
        assert (last.source, last.target, last.event, last.actor) == (
            "thinking", "budget_exceeded", "over_budget", "budget",
        )  # fmt: skip
        assert (await store.load(stopped.run_id)).state == "budget_exceeded"

        with pytest.raises(RunNotResumable, match="still over its budget: budget cost_usd"):
            await agent.resume(stopped.run_id, budget=Budget(cost_usd=0.06))
        assert len(server.requests) == 3

        done = await agent.resume(stopped.run_id, budget=Budget(cost_usd=0.20))
        assert (done.status, done.output, len(server.requests)) == ("done", "Done.", 4)
        raised = next(t for t in done.transitions if t.event == "budget_raised")
        assert (raised.source, raised.target) == ("budget_exceeded", "thinking")
        assert (await store.load(done.run_id)).budget == Budget(cost_usd=0.20)


async def test_a_tool_call_budget_stops_before_a_batch_and_runs_it_once_raised() -> None:
    ran: list[str] = []
    batch = calls(call("lookup", {"key": "b"}), call("lookup", {"key": "c"}))
    model = ScriptedModel([call("lookup", {"key": "a"}), batch, "Done."])
    agent = Agent(model, counting_tools(ran), store=MemoryStore(), budget=Budget(tool_calls=2))
    stopped = await agent.run("look keys up")
    assert (stopped.status, ran) == ("failed", ["a"])  # 1 ran + a batch of 2 > 2: none starts
    assert overrun_of(stopped).before == "tool batch"
    assert (overrun_of(stopped).spent.tool_calls, overrun_of(stopped).next) == (1, 2)
    state = await agent.store.load(stopped.run_id)
    assert [c.status for c in state.batch] == ["approved", "approved"]  # intent withdrawn
    assert stopped.transitions[-1].source == "executing_tool"

    done = await agent.resume(stopped.run_id, budget=Budget(tool_calls=3))
    assert (done.status, ran) == ("done", ["a", "b", "c"])
    raised = next(t for t in done.transitions if t.event == "budget_raised")
    assert raised.target == "executing_tool"


def used(item: str | tuple[str, dict[str, str]], tokens: int, cost: float | None = 0.0) -> Turn:
    turn = text(item) if isinstance(item, str) else calls(call(*item))
    usage = Usage(prompt_tokens=tokens, completion_tokens=0, cost_usd=cost,
                  unpriced=int(cost is None))  # fmt: skip
    return Turn(turn.reply, turn.expect, usage)


async def test_a_tree_budget_counts_a_sub_agents_tokens() -> None:
    store, ran = MemoryStore(), []
    child = Agent(ScriptedModel([used("Found it.", 200)]), counting_tools(ran), store=store)
    helper = child.as_tool(name="helper", description="Finds things.")
    parent_model = ScriptedModel([used(("helper", {"task": "find it"}), 100), "never asked"])
    parent = Agent(parent_model, [helper], store=store, budget=Budget(tokens=250))
    stopped = await parent.run("find it")
    assert stopped.status == "failed"
    assert stopped.usage.total_tokens == 100  # its own tokens are under the limit
    assert overrun_of(stopped).spent.tokens == 300  # with its sub-agent's 200
    child_run = (await store.load(stopped.run_id)).calls[0].child_run_id
    assert child_run is not None
    assert (await store.load(child_run)).budget == Budget(tokens=250)  # the child keeps it


async def test_unpriced_calls_count_toward_tokens_and_a_cost_budget_says_it_cannot_see_them() -> (
    None
):
    ran: list[str] = []
    model = ScriptedModel(
        [used(("lookup", {"key": "a"}), 400, None), used(("lookup", {"key": "b"}), 400, 0.04),
         used("Done.", 400, 0.04)]
    )  # fmt: skip
    agent = Agent(model, counting_tools(ran), store=MemoryStore(),
                  budget=Budget(cost_usd=0.05, tokens=10_000))  # fmt: skip
    stopped = await agent.run("look keys up")
    over = overrun_of(stopped)
    assert (over.limit, over.spent.tokens, over.spent.unpriced) == ("cost_usd", 800, 1)
    assert "1 model call(s) could not be priced" in over.message

    unpriced = ScriptedModel([used(("lookup", {"key": "a"}), 900, None), "never"])
    tokens = Agent(unpriced, counting_tools(ran), store=MemoryStore(), budget=Budget(tokens=1000))
    by_tokens = await tokens.run("look it up")
    assert overrun_of(by_tokens).limit == "tokens"  # unpriced, still counted


AGENT_MODULE = """
from loopstate import Agent, ScriptedModel, tool

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key

def agent():
    return Agent(ScriptedModel(["Done."]), [lookup])
"""


@pytest.fixture
def stopped_run(tmp_path: Path) -> tuple[str, str]:
    """A run in `runs.db` under `tmp_path` resting in `budget_exceeded` (one model call
    allowed, a second one due), and the module `budgeted.py` whose agent finishes it."""
    (tmp_path / "budgeted.py").write_text(AGENT_MODULE)
    db = str(tmp_path / "runs.db")
    model = ScriptedModel([call("lookup", {"key": "a"})])
    agent = Agent(model, counting_tools([]), store=SQLiteStore(db), budget=Budget(model_calls=1))
    stopped = agent.run_sync("look it up")
    assert stopped.status == "failed"
    return db, stopped.run_id


def test_the_cli_resumes_a_run_with_a_raised_budget(
    tmp_path: Path, stopped_run: tuple[str, str]
) -> None:
    db, run_id = stopped_run
    done = loopstate(
        "resume", run_id, "--agent", "budgeted:agent", "--budget", "model_calls=2", "--db", db,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "budget_exceeded → thinking" in done.stdout
    assert "answer: Done." in done.stdout


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("cost=2", "give LIMIT=VALUE with LIMIT one of tokens, cost_usd"),
        ("cost_usd", "give LIMIT=VALUE"),
        ("tokens=-1", "--budget tokens: Input should be greater than or equal to 0"),
        ("cost_usd=lots", "--budget cost_usd: Input should be a valid number"),
        ("model_calls=1", "still over its budget: budget model_calls exceeded"),
    ],
)
def test_a_bad_budget_on_the_command_line_is_one_line_saying_what(
    tmp_path: Path, stopped_run: tuple[str, str], given: str, says: str
) -> None:
    db, run_id = stopped_run
    done = loopstate(
        "resume", run_id, "--agent", "budgeted:agent", "--budget", given, "--db", db,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert says in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_wall_time_budget_counts_the_time_spent_in_model_calls_and_tools() -> None:
    ticks = iter(range(1_000_000))

    def clock() -> float:  # every reading one second later: a model call takes seconds
        return float(next(ticks))

    model = ScriptedModel([call("lookup", {"key": "a"}), "never asked"])
    agent = Agent(model, counting_tools([]), store=MemoryStore(), clock=clock,
                  budget=Budget(wall_s=0.5))  # fmt: skip
    stopped = await agent.run("look it up")
    over = overrun_of(stopped)
    assert (over.limit, over.before) == ("wall_s", "tool batch")
    assert over.spent.wall_s >= 1
    assert len(model.requests) == 1


async def test_a_sub_agent_at_the_tree_budget_rests_with_its_parent_and_a_raised_one_goes_on() -> (
    None
):
    store, ran = MemoryStore(), []
    child_model = ScriptedModel([call("lookup", {"key": "a"}), "Found a."])
    child = Agent(child_model, counting_tools(ran), store=store)
    helper = child.as_tool(name="helper", description="Finds things.")
    parent_model = ScriptedModel([call("helper", {"task": "find a"}), "It is a."])
    parent = Agent(parent_model, [helper], store=store, budget=Budget(model_calls=2))
    stopped = await parent.run("find a")
    assert (stopped.status, len(child_model.requests), ran) == ("failed", 1, ["a"])
    assert overrun_of(stopped).limit == "model_calls"
    assert overrun_of(stopped).spent.model_calls == 2  # the parent's and its sub-agent's
    parent_state = await store.load(stopped.run_id)
    assert parent_state.state == "budget_exceeded"
    (record,) = parent_state.calls
    assert record.status == "awaiting"  # waits for its sub-agent's run, which rests too
    assert (await store.load(record.child_run_id or "")).state == "budget_exceeded"
    with pytest.raises(RunNotResumable, match="still over its budget"):
        await parent.resume(stopped.run_id, budget=Budget(model_calls=2))
    done = await parent.resume(stopped.run_id, budget=Budget(model_calls=10))
    assert (done.status, done.output) == ("done", "It is a.")
    assert (len(child_model.requests), ran) == (2, ["a"])  # the same child run went on
    assert parent_model.requests[1].messages[-1].content == "Found a."


async def test_a_sub_agent_that_reaches_a_raised_budget_again_rests_its_parent_again() -> None:
    store, ran = MemoryStore(), []
    child_model = ScriptedModel(
        [call("lookup", {"key": "a"}), call("lookup", {"key": "b"}), "Found a and b."]
    )
    helper = Agent(child_model, counting_tools(ran), store=store)
    parent_model = ScriptedModel([call("helper", {"task": "find a, b"}), "a and b."])
    tools = [helper.as_tool(name="helper", description="Finds things.")]
    parent = Agent(parent_model, tools, store=store, budget=Budget(model_calls=2))
    stopped = await parent.run("find a and b")
    again = await parent.resume(stopped.run_id, budget=Budget(model_calls=3))
    assert (again.status, ran) == ("failed", ["a", "b"])  # the child's next call would pass 3
    assert overrun_of(again).spent.model_calls == 3
    last = again.transitions[-1]
    assert (last.source, last.event, last.target) == (
        "awaiting_approval", "over_budget", "budget_exceeded",
    )  # fmt: skip
    done = await parent.resume(stopped.run_id, budget=Budget(model_calls=10))
    assert (done.status, done.output, ran) == ("done", "a and b.", ["a", "b"])
    assert len(child_model.requests) == 3
