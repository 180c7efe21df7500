"""Only your team's work: a run started by an identity with a `tenant` carries it (in its
`metadata`, under `tenant`; a sub-agent's run is its top run's), and an identity with a
tenant sees and acts on that tenant's runs only — any other run is answered 404, as if it
did not exist, so run ids do not leak. An identity without a tenant sees every run."""

from __future__ import annotations

from loopstate.engine.errors import LoopstateError
from loopstate.engine.state import RunState
from loopstate.engine.store import Store

TENANT = "tenant"
"""The run `metadata` key that holds the tenant a run was started under."""
MAX_CACHED = 10_000
"""Runs whose tenant is kept in memory (a run's tenant never changes)."""
_DEPTH = 32
"""Parents followed at most to find a sub-agent's run's top run."""


def tenant_in(state: RunState) -> str | None:
    value = state.metadata.get(TENANT)
    return value if isinstance(value, str) else None


class Tenancy:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._known: dict[str, str | None] = {}

    async def tenant_of(self, run_id: str) -> str | None:
        """The tenant run `run_id` (or the top run of its tree) was started under; raises
        `LoopstateError` when the run cannot be read."""
        if run_id in self._known:
            return self._known[run_id]
        state = await self.store.load(run_id)
        for _ in range(_DEPTH):
            if state.parent is None or tenant_in(state) is not None:
                break
            state = await self.store.load(state.parent.run_id)
        if len(self._known) >= MAX_CACHED:
            self._known.clear()
        tenant = self._known[run_id] = tenant_in(state)
        return tenant

    async def visible(self, tenant: str | None, run_id: str) -> bool:
        """Whether an identity of `tenant` (None: every tenant) may see run `run_id`."""
        if tenant is None:
            return True
        try:
            return await self.tenant_of(run_id) == tenant
        except LoopstateError:
            return False  # gone, damaged or not a run: nothing to show this identity
