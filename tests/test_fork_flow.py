"""Flows fork as agent runs do: the phase and its collected data are those at the transition."""

from __future__ import annotations

from loopstate import MemoryStore, ScriptedModel
from loopstate.machines.coaching import coaching_flow


async def test_a_flow_forked_where_it_waited_for_the_user_takes_another_answer() -> None:
    model = ScriptedModel(["What is your goal?", "Which distance?", "Which marathon?"])
    models = {"default": model, "analyst": model, "plan": model}
    ids = iter(["coach-1", "fork-1"])
    flow = coaching_flow(models=models, store=MemoryStore(), ids=ids.__next__)
    asked = await flow.run("hi")
    await flow.resume(asked.run_id, message="to run faster")
    seq = len(asked.transitions)

    fork_id = await flow.fork(asked.run_id, at=seq)
    fork = await flow.store.load(fork_id)
    # as saved with transition `seq`: answered, before the flow noted that it waits
    assert (fork.state, fork.phase, len(fork.transitions)) == ("done", asked.phase, seq)
    waiting = await flow.resume(fork_id)
    assert (waiting.status, len(model.requests)) == ("awaiting_input", 2)
    result = await flow.resume(fork_id, message="a marathon")

    assert (result.status, len(model.requests)) == ("awaiting_input", 3)
    users = [m.content for m in result.messages if m.role == "user"]
    assert users == ["hi", "a marathon"]
