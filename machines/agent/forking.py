"""`Agent.fork`: a new run whose past is a stored run's up to a transition (see
`loopstate.engine.fork`), opened by the forking agent's instructions. Kept apart from
`agent.py` so that the facade stays one screen of entry points."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from loopstate.engine.fork import fork_run
from loopstate.engine.store import lease_owner

if TYPE_CHECKING:
    from loopstate.machines.agent.agent import Agent


async def fork(
    self: Agent,
    run_id: str,
    *,
    at: int,
    message: str | None = None,
    replace_result: Mapping[str, str] | None = None,
    replace_message: tuple[int, str] | None = None,
    actor: str = "user",
) -> str:
    """The id of a new run: run `run_id` copied up to and including transition `at`, with no
    model or tool call, opened by this agent's instructions; `message` is appended and
    `replace_result` (by call id) or `replace_message` (index, text) edit the fork point.
    Continue it with `resume`. `ForkRefused` or `RunBusy` (one line, nothing written) when
    it cannot be forked; see `loopstate.engine.fork` for what is safe by construction."""
    options = self.options
    state = await fork_run(
        options.store, run_id, at=at, new_id=self.ids(), by=actor, clock=self.clock,
        owner=lease_owner(), lease_s=options.lease_s, message=message,
        replace_result=replace_result, replace_message=replace_message,
        instructions=self.instructions,
    )  # fmt: skip
    return state.run_id
