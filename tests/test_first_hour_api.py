"""What a newcomer's first mistakes with the library give back: one clear line each."""

from __future__ import annotations

import pytest
from model_server import serve, text_reply, tool_call_reply

from loopstate import Agent, Approve, LiteLLMModel, MemoryStore, RunResult, ScriptedModel, tool
from loopstate.engine.models.scripted import call


@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def shop(store: MemoryStore) -> Agent:
    script = ScriptedModel([call("refund", {"order": "A1"}), "Refunded."], by_step=True)
    return Agent(script, [refund], store=store, ids=lambda: "run-1")


def test_a_model_name_without_a_provider_fails_the_run_with_one_line_naming_the_fix() -> None:
    result = Agent("gtp-4o-mini", store=MemoryStore()).run_sync("hi")
    assert result.status == "failed"
    assert result.error == (
        "ModelError: unknown model provider in 'gtp-4o-mini': start the name with its "
        "provider, e.g. openai/gpt-4o-mini or anthropic/claude-sonnet-4-5 "
        "(the list: https://docs.litellm.ai/docs/providers)"
    )
    assert result.failure is not None
    assert result.failure.error_type == "unknown_provider"
    assert str(result) == f"failed: {result.error}"


async def test_run_sync_inside_a_running_loop_says_to_await_run_instead() -> None:
    agent = shop(MemoryStore())
    with pytest.raises(RuntimeError, match=r"use `await agent\.run\(\.\.\.\)` there"):
        agent.run_sync("refund A1")
    with pytest.raises(RuntimeError, match=r"use `await agent\.resume\(\.\.\.\)` there"):
        agent.resume_sync("run-1")
    assert await agent.store.list_runs() == []  # nothing was started


def test_resume_sync_continues_a_suspended_run_and_str_says_what_it_waits_for() -> None:
    agent = shop(MemoryStore())
    first = agent.run_sync("refund A1")
    assert str(first) == (
        "awaiting_approval: run run-1 waits for 1 call(s) to decide (call_1_1 refund)"
    )
    done = agent.resume_sync("run-1", {"call_1_1": Approve()})
    assert str(done) == "done: Refunded."


async def test_a_run_whose_calls_could_not_be_priced_totals_an_unknown_cost() -> None:
    with serve(tool_call_reply(("c1", "refund", {"order": "A1"})), text_reply("Refunded.")) as s:
        model = LiteLLMModel("openai/test-model", api_base=s.openai_base, api_key="k")
        agent = Agent(model, [refund], store=MemoryStore(), auto_approve=True)
        result = await agent.run("refund A1")
    assert result.status == "done"
    assert (result.usage.cost_usd, result.usage.unpriced) == (None, 2)  # not 0.0: unknown
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (22, 14)


def test_str_of_a_run_that_stopped_before_its_end_names_the_run_to_resume() -> None:
    assert str(RunResult(run_id="r-7", status="running")) == (
        "running: run r-7 stopped before its end; resume it"
    )
