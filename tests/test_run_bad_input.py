"""Bad input never crashes a run: it becomes a tool result the model can act on."""

from __future__ import annotations

import pytest
from support import make_tools

from loopstate import Agent, Hooks, ModelError, ModelRequest, ModelResponse, ScriptedModel
from loopstate.engine.models.scripted import call, calls


async def run_one_bad_call(bad_call) -> tuple[str, object]:
    counted, tools = make_tools()
    model = ScriptedModel([bad_call, "recovered"])
    result = await Agent(model, tools).run("go")
    assert result.status == "done"
    assert result.output == "recovered"
    seen = model.requests[1].messages[-1]
    assert seen.role == "tool"
    return seen.content, counted


@pytest.mark.parametrize(
    ("bad_call", "expected"),
    [
        (call("read_file", '{"path": "a"'), "invalid arguments for read_file: not valid JSON"),
        (call("read_file", "[1, 2]"), "arguments must be a JSON object"),
        (call("delete_everything", {}), "unknown tool 'delete_everything'. Available tools: "),
        (call("read_file", {"path": 3}), "path: Input should be a valid string"),
        (call("read_file", {}), "path: Field required"),
        (call("read_file", {"path": "a", "mode": "x"}), "mode: Extra inputs are not permitted"),
        (call("boom", {"x": 1}), "boom raised ValueError: bad x 1"),
        (call("slow", {}), "slow timed out after 0.05 s"),
        (call("pay", '{"amount": NaN}'), "NaN is not valid JSON"),
        (call("pay", '{"amount": -Infinity}'), "-Infinity is not valid JSON"),
        (call("read_file", "[" * 100_000), "nested more than 64 levels deep"),
        (call("read_file", '{"path": ' + "[" * 65 + "]" * 65 + "}"), "nested more than 64"),
    ],
    ids=[
        "unparsable",
        "not-object",
        "unknown-tool",
        "wrong-type",
        "missing",
        "extra",
        "raises",
        "timeout",
        "nan",
        "infinity",
        "deep-unparsable",
        "too-deep",
    ],
)
async def test_a_bad_call_becomes_a_result_that_explains_the_error(bad_call, expected) -> None:
    content, _ = await run_one_bad_call(bad_call)
    assert expected in content


async def test_an_invalid_call_never_runs_and_never_asks_for_approval() -> None:
    content, counted = await run_one_bad_call(call("write_file", {"path": "a"}))
    assert "content: Field required" in content
    assert counted["write_file"] == 0


async def test_retries_run_a_failing_tool_again_up_to_the_limit() -> None:
    from loopstate import tool

    attempts = []

    @tool(retries=2)
    def flaky() -> str:
        """Fails twice, then works."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "worked"

    model = ScriptedModel([call("flaky"), "ok"])
    await Agent(model, [flaky]).run("go")
    assert len(attempts) == 3
    assert model.requests[1].messages[-1].content == "worked"


async def test_a_huge_result_keeps_its_start_and_end_with_a_note() -> None:
    from loopstate import tool

    @tool(max_result_chars=1000)
    def big() -> str:
        """Returns a lot."""
        return "START\n" + "x\n" * 5000 + "ERROR: the last line\n"

    model = ScriptedModel([call("big"), "ok"])
    await Agent(model, [big]).run("go")
    content = model.requests[1].messages[-1].content
    assert content.startswith("START\nx\n")
    assert content.endswith("x\nERROR: the last line\n")
    assert "characters cut here (lines " in content
    assert len(content) <= 1000


async def test_a_huge_error_is_truncated_by_the_same_policy() -> None:
    from loopstate import tool

    @tool(max_result_chars=1000)
    def failing() -> str:
        """Fails with a long message."""
        raise ValueError("context " * 1000 + "the cause")

    model = ScriptedModel([call("failing"), "ok"])
    await Agent(model, [failing]).run("go")
    content = model.requests[1].messages[-1].content
    assert content.startswith("Error: failing raised ValueError: context")
    assert content.endswith("the cause")
    assert "characters cut here within line 1]" in content
    assert len(content) <= 1000


async def test_max_steps_ends_the_run_in_done_with_a_clear_stop_reason() -> None:
    _, tools = make_tools()
    model = ScriptedModel([call("read_file", {"path": str(i)}) for i in range(10)])
    result = await Agent(model, tools, max_steps=3).run("go")
    assert (result.status, result.stop_reason, result.steps) == ("done", "max_steps", 3)
    assert len(model.requests) == 3
    assert model.remaining == 7


async def test_a_user_stop_condition_ends_the_run_with_its_reason() -> None:
    _, tools = make_tools()

    def read_twice(run) -> str | None:
        reads = [c for c in run.calls if c.tool == "read_file"]
        return "read enough" if len(reads) >= 2 else None

    model = ScriptedModel(
        [calls(call("read_file", {"path": "a"})), call("read_file", {"path": "b"})]
    )
    result = await Agent(model, tools, stop_when=[read_twice]).run("go")
    assert (result.status, result.stop_reason) == ("done", "read enough")


async def test_a_model_error_fails_the_run_with_the_error_recorded() -> None:
    model = ScriptedModel([])
    result = await Agent(model).run("go")
    assert result.status == "failed"
    assert result.error is not None
    assert "ScriptExhausted" in result.error
    assert result.transitions[-1].target == "failed"
    assert isinstance(ModelError("x"), Exception)


async def test_an_error_in_a_guard_fails_the_run_with_the_error_recorded() -> None:
    from loopstate.engine.core import RunCore, RunPorts
    from loopstate.engine.options import RunOptions
    from loopstate.engine.state import RunState
    from loopstate.engine.stores.memory import MemoryStore
    from loopstate.machines import AgentLoop
    from loopstate.machines.agent.steps import LoopConfig, LoopSteps

    class Broken(AgentLoop):
        def has_gated_calls(self, gated: int) -> bool:
            raise RuntimeError("guard broke")

    store = MemoryStore()
    state = RunState(run_id="r", messages=())
    await store.create(state, owner="me", now=0, ttl=60)
    config = LoopConfig(
        model=ScriptedModel([call("anything")]),
        options=RunOptions(store=store),
        machine=lambda s: Broken(start_value=s),
    )
    core = RunCore(state, RunPorts(store=store, clock=lambda: 0.0, owner="me", lease_s=60))
    await core.drive(LoopSteps(core, config))
    assert core.state.status == "failed"
    assert core.state.error == "RuntimeError: guard broke"
    assert (await store.load("r")).state == "failed"


async def test_an_error_in_a_hook_is_not_swallowed_it_fails_the_run() -> None:
    class Broken(Hooks):
        async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
            raise LookupError("hook broke")

    result = await Agent(ScriptedModel(["hi"]), hooks=Broken()).run("go")
    assert result.status == "failed"
    assert result.error == "LookupError: hook broke"
