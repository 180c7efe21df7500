"""The options every kind of run takes (`Agent` and `Flow` alike), in one object."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopstate.engine.approval import Approver, as_approver
from loopstate.engine.budget import Budget
from loopstate.engine.clock import Clock, IdSource, random_ids, system_clock
from loopstate.engine.deadlines import seconds
from loopstate.engine.executor import DenialFormatter
from loopstate.engine.hooks import HookChain, Hooks
from loopstate.engine.rule import Rule
from loopstate.engine.state import RunState
from loopstate.engine.store import DEFAULT_LEASE_S, Store

StopCondition = Callable[[RunState], bool | str | None]
"""Looked at after each batch of tool results: a truthy value ends the run in `done`
(a string is the stop reason; otherwise the function's name is)."""


@dataclass(frozen=True)
class RunOptions:
    """Ports and policy shared by every run of an agent or a flow."""

    store: Store
    approver: Approver | None = None
    auto_approve: bool = False
    denial_message: DenialFormatter | None = None
    """The text the model receives for a denied call, unless the `Deny` carries a `message`."""
    hooks: HookChain | None = None
    workspace: Path | None = None
    deps: Any = None
    ask_again_after_crash: bool = False
    clock: Clock = system_clock
    ids: IdSource = random_ids
    lease_s: float = DEFAULT_LEASE_S
    log: Any = None
    budget: Budget | None = None
    """The limits every run started with these options keeps (stored with the run)."""
    rules: tuple[Rule, ...] = ()
    """Rules that gate or forbid calls (`Agent(rules=...)`), kept with each run it drives."""
    decide_within: float | None = None
    """The run-wide default for `@tool(decide_within=)`: seconds a gated call may wait."""
    on_expiry: Any = None
    """The run-wide default for `@tool(on_expiry=)`."""
    rest_when_fixable: bool = False
    """A model call refused for the set-up (`ModelError.fixable`: an API key, the model's
    name) rests the run in `model_failed` for a resume once it is fixed, instead of ending
    it. `Agent` and `Flow` set it (`of`); a Temporal workflow builds its own options and
    keeps such an error final, as its tests lock."""

    @property
    def deadline(self) -> tuple[float | None, Any]:
        """The default deadline of a gated call: (seconds, what decides it on expiry)."""
        return self.decide_within, self.on_expiry

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> RunOptions:
        """The options among a facade's constructor `arguments` (`Agent`, `Flow`), normalized:
        the default store, a sync approver adapted, hooks chained, the workspace a path."""
        given = {k: v for k, v in arguments.items() if k in _FIELDS}
        approver = given.get("approver")
        return cls(
            **{
                **given,
                "store": default_store(given.get("store")),
                "approver": None if approver is None else as_approver(approver),
                "hooks": hook_chain(given.get("hooks")),
                "workspace": workspace_path(given.get("workspace")),
                "rules": tuple(given.get("rules") or ()),
                "decide_within": seconds(given.get("decide_within")),
                "rest_when_fixable": True,
            }
        )


_FIELDS = frozenset(RunOptions.__dataclass_fields__)


def default_store(store: Store | None) -> Store:
    """`store`, or the default one: `LOOPSTATE_DB`, else the SQLite file `.loopstate/runs.db`
    of the nearest project directory (see `loopstate.engine.stores.location`)."""
    if store is not None:
        return store
    from loopstate.engine.stores.location import default_db, store_at

    return store_at(default_db())


def hook_chain(hooks: Hooks | Sequence[Hooks] | None) -> HookChain | None:
    """One chain of the given hooks; None when there are none (the hot path skips them)."""
    if hooks is None:
        return None
    chain = HookChain([hooks] if isinstance(hooks, Hooks) else list(hooks))
    return chain if chain.hooks else None


def workspace_path(workspace: str | Path | None) -> Path | None:
    return Path(workspace) if workspace is not None else None
