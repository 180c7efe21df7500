"""The one path every decision takes: from an approver, `resume(decisions=...)`, a standing
(remembered) decision, or a decision queued on the stored run (the CLI, HTTP, a Temporal
Update). Each is checked by the one checker (`check_decision`), when it is recorded and again
when it is applied, in the same order:

    recover interrupted calls → queued decisions → given decisions → announce → drive

`Decisions` only computes: the run once decisions are applied, and what to announce
(`Decided`); the loop's steps (`LoopSteps.commit`) assign it, send the events and save. A
queued decision that is refused when applied is dropped and reported (`decision_refused`),
never left to poison the run: the call stays pending and can be decided again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loopstate.engine.approval import Approve, Decision, Deny, as_decisions
from loopstate.engine.core import Cause
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import DecisionError
from loopstate.engine.rule import Rule, forbidding
from loopstate.engine.state import CallRecord, Remembered, Revocation, RunState

if TYPE_CHECKING:
    from loopstate.engine.clock import Clock
    from loopstate.engine.executor import Executor
    from loopstate.engine.tool import Tool


@dataclass(frozen=True)
class Refusal:
    """A queued decision refused when applied: reported, then dropped."""

    call_id: str
    actor: str
    reason: str


@dataclass(frozen=True)
class Decided:
    """The run once decisions are applied, what to announce (in order: each decided call,
    each refused queued decision), and why it ends if an `Abort` was among them."""

    state: RunState
    announced: tuple[CallRecord | Refusal, ...] = ()
    abort: Cause | None = None

    def then(self, other: Decided) -> Decided:
        return Decided(other.state, (*self.announced, *other.announced), other.abort)


class Decisions:
    """Decisions on the current batch of one loop's run: computed, never assigned."""

    def __init__(self, executor: Executor, tools: Mapping[str, Tool], clock: Clock) -> None:
        self.executor = executor
        self.tools = tools
        self.clock = clock

    def apply(self, state: RunState, decisions: object, *, actor: str) -> Decided:
        """`state` with decisions (by call id) applied, all or none: `DecisionError` if one
        is refused. An `Abort` among them ends the run (`Decided.abort`)."""
        checked = [
            check_decision(state, cid, d, tools=self.tools)
            for cid, d in as_decisions(decisions).items()
        ]
        now = self.clock()
        decided = [
            self.executor.decide(call, d, actor=_actor(actor, d.by), at=now) for call, d in checked
        ]
        for record in decided:
            state = remember(state.replace_call(record), record)
        aborts = [
            r.decision for r in decided if r.decision is not None and r.decision.kind == "abort"
        ]
        abort = Cause(getattr(aborts[0], "reason", "aborted"), actor) if aborts else None
        return Decided(state, tuple(decided), abort)

    def remembered(self, state: RunState) -> dict[str, Decision]:
        """The waiting calls a standing decision of the run covers (a denial first, if both
        kinds cover a call), decided as it decides; audited as decided by
        `remembered:<tool or rule> (given by <who>)`."""
        standing = sorted(state.remembered, key=lambda r: r.decision != "deny")  # stricter first
        decisions: dict[str, Decision] = {}
        for call in state.batch:
            if call.status != "awaiting" or call.external:  # a result comes from outside
                continue
            match = next((r for r in standing if r.covers(call)), None)
            if (
                match is not None
                and match.decision == "approve"
                and forbidding(state.rules, call.request())
            ):
                continue  # a forbidding rule of the run overrides a remembered approval
            if match is not None and match.decision in call.allowed:
                decisions[call.call_id] = match.decide()
        return decisions

    def queued(self, state: RunState) -> Decided:
        """`state` with the decisions queued on it applied, each with its own actor; one that
        is refused now is reported and dropped. An abort stops the rest."""
        decided = Decided(state.evolve(inbox=()) if state.inbox else state)
        for queued in state.inbox:
            if decided.abort is not None:
                break
            try:
                step = self.apply(
                    decided.state, {queued.call_id: queued.decision}, actor=queued.actor
                )
            except DecisionError as exc:
                refusal = Refusal(queued.call_id, queued.actor, str(exc))
                decided = Decided(decided.state, (*decided.announced, refusal))
                continue
            decided = decided.then(step)
        return decided

    def recovered(self, state: RunState, *, ask_again: bool) -> tuple[RunState, tuple[str, ...]]:
        """After a crash: `state` with the calls that were running when it died decided (run
        again, asked again, or reported), and their ids."""
        lost = [c for c in state.batch if c.status == "running"]
        for record in lost:
            state = state.replace_call(self.executor.recover(record, ask_again=ask_again))
        return state, tuple(c.call_id for c in lost)


def remember(state: RunState, record: CallRecord) -> RunState:
    """`state` keeping a decision given with `remember=` as a standing decision of the run,
    for its tool or for the calls its rule matches; one it replaces is marked revoked."""
    decision = record.decision
    if not isinstance(decision, Approve | Deny) or decision.remember is False:
        return state
    rule = decision.remember if isinstance(decision.remember, Rule) else None
    by, at = record.decided_by or "unknown", record.decided_at or 0.0
    standing = Remembered(
        tool=None if rule is not None else record.tool,
        rule=rule,
        decision=decision.kind,
        reason=getattr(decision, "reason", ""),
        message=getattr(decision, "message", None),
        by=by,
        at=at,
    )
    replaced = Revocation(by=by, at=at, reason="replaced by a later decision")
    kept = tuple(
        r.evolve(revoked=replaced) if r.revoked is None and r.subject == standing.subject else r
        for r in state.remembered
    )
    return state.evolve(remembered=(*kept, standing))


def _actor(actor: str, by: str | None) -> str:
    """Who decided, as audited: the approver, and the rule inside it that decided, if named."""
    return actor if by is None else f"{actor}:{by}"
