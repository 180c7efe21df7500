"""The one path every decision takes: from an approver, `resume(decisions=...)`, or a decision
queued on the stored run (the CLI, later HTTP). Each is validated when it is recorded and again
when it is applied, by the same code, in the same order:

    recover interrupted calls → queued decisions → given decisions → announce → drive

A queued decision that is refused when applied is dropped and reported (`decision_refused`),
never left to poison the run: the call stays pending and can be decided again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loopstate.engine.approval import Approve, Deny, as_decisions
from loopstate.engine.core import Cause
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import DecisionError
from loopstate.engine.events import ApprovalRequested, DecisionRefused, ToolApproval
from loopstate.engine.rule import Rule
from loopstate.engine.state import CallRecord, Remembered, Revocation

if TYPE_CHECKING:
    from loopstate.machines.agent.steps import LoopSteps


class Decisions:
    """Decisions on the current batch of one loop."""

    def __init__(self, loop: LoopSteps) -> None:
        self.loop = loop

    async def wait(self) -> bool:
        """The `awaiting_approval` step: announce the calls that wait; ask the approver, if
        any; move on once every call is decided, or wait (False) for decisions from outside."""
        loop, core = self.loop, self.loop.core
        await loop.delegations.resume_waiting()
        if loop.delegations.aborted is not None:  # a person aborted a sub-agent: the tree ends
            await core.end(loop, "abort", loop.delegations.aborted)
            return True
        await self.apply_remembered()
        waiting = [c for c in loop.state.batch if c.status == "awaiting"]
        approver = loop.config.options.approver
        # a call that waits for its sub-agent is announced in the sub-agent's run
        requests = [c.request() for c in waiting if c.child_run_id is None]
        asked = [r for r in requests if not r.external]  # a result comes from outside
        # Announced with their complete arguments whoever decides: an approver now, or
        # someone after the run has suspended (a streamed run's reader sees what waits).
        for r in requests:
            await core.emit(
                ApprovalRequested(
                    **core.at(),
                    call_id=r.call_id,
                    tool=r.tool,
                    arguments=r.arguments,
                    reason=r.reason,
                )
            )
        if requests and core.hooks is not None:
            await core.hooks.on_approval_requested(requests)
        if asked and approver is not None:
            await self.apply(await approver(asked), actor="approver")
            if loop.ended():
                return True
            waiting = [c for c in loop.state.batch if c.status == "awaiting"]
        if waiting:
            await core.save()
            return False
        loop.send(Cause(actor=self._actors()), loop.machine.decided)
        loop.mark_running()
        await core.save()
        return True

    async def apply(self, decisions: object, *, actor: str) -> None:
        """Apply decisions (by call id) to the current batch, all or none: `DecisionError`
        changes nothing. An `Abort` ends the run."""
        loop = self.loop
        state, tools = loop.state, loop.config.tools
        checked = [
            check_decision(state, cid, d, tools=tools) for cid, d in as_decisions(decisions).items()
        ]
        now = loop.config.options.clock()
        decided = [
            loop.executor.decide(call, d, actor=_actor(actor, d.by), at=now) for call, d in checked
        ]
        for record in decided:
            loop.state = loop.state.replace_call(record)
            self._remember(record)
            assert record.decision is not None
            await self.announce(record, record.decision.kind)
            if loop.core.hooks is not None:
                await loop.core.hooks.on_approval_decided(record)
        aborts = [
            r.decision for r in decided if r.decision is not None and r.decision.kind == "abort"
        ]
        if aborts:
            reason = getattr(aborts[0], "reason", "aborted")
            await loop.core.end(loop, "abort", Cause(reason, actor))

    async def apply_remembered(self) -> None:
        """Decide the waiting calls that a standing decision of this run covers (a denial
        first, if both kinds cover a call); audited as decided by
        `remembered:<tool or rule> (given by <who>)`."""
        standing = sorted(
            self.loop.state.remembered, key=lambda r: r.decision != "deny"
        )  # the stricter first
        decisions = {}
        for call in self.loop.state.batch:
            if call.status != "awaiting" or call.external:  # a result comes from outside
                continue
            match = next((r for r in standing if r.covers(call)), None)
            if match is not None and match.decision in call.allowed:
                decisions[call.call_id] = match.decide()
        if decisions:
            await self.apply(decisions, actor="remembered")

    def _remember(self, record: CallRecord) -> None:
        """Keep a decision given with `remember=` as a standing decision of the run, for its
        tool or for the calls its rule matches; one it replaces is marked revoked."""
        decision = record.decision
        if not isinstance(decision, Approve | Deny) or decision.remember is False:
            return
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
            for r in self.loop.state.remembered
        )
        self.loop.state = self.loop.state.evolve(remembered=(*kept, standing))

    async def apply_queued(self) -> None:
        """Apply the decisions queued on the stored run, each with its own actor; drop and
        report any that is refused now."""
        loop, core = self.loop, self.loop.core
        inbox = loop.state.inbox
        if not inbox:
            return
        loop.state = loop.state.evolve(inbox=())
        for queued in inbox:
            if loop.ended():
                break
            try:
                await self.apply({queued.call_id: queued.decision}, actor=queued.actor)
            except DecisionError as exc:
                core.log.warning("decision_refused", call_id=queued.call_id, error=str(exc))
                await core.emit(
                    DecisionRefused(
                        **core.at(), call_id=queued.call_id, actor=queued.actor, reason=str(exc)
                    )
                )

    def recover(self) -> tuple[str, ...]:
        """After a crash: decide what happens to calls that were running when it died."""
        loop = self.loop
        lost = [c for c in loop.state.batch if c.status == "running"]
        ask_again = loop.config.options.ask_again_after_crash
        for record in lost:
            loop.state = loop.state.replace_call(loop.executor.recover(record, ask_again=ask_again))
        if loop.state.state == "executing_tool" and loop.core.pending_ids():
            cause = Cause("interrupted calls need a new decision", "system")
            loop.send(cause, loop.machine.reapprove)
        return tuple(c.call_id for c in lost)

    async def prepare(self, decisions: Mapping[str, Any] | None, actor: str) -> tuple[str, ...]:
        """Before a resumed loop is driven: recover, queued decisions, given decisions.
        Returns the recovered call ids."""
        recovered = self.recover()
        await self.apply_queued()
        if decisions and not self.loop.ended():
            await self.apply(decisions, actor=actor)
        return recovered

    async def announce(self, record: CallRecord, outcome: Any) -> None:
        core = self.loop.core
        await core.emit(
            ToolApproval(
                **core.at(),
                call_id=record.call_id,
                tool=record.tool,
                outcome=outcome,
                actor=record.decided_by or "policy",
                reason=getattr(record.decision, "reason", None) or record.reason or None,
            )
        )

    def _actors(self) -> str | None:
        actors = {c.decided_by for c in self.loop.state.batch if c.decided_by}
        return ",".join(sorted(actors)) or None


def _actor(actor: str, by: str | None) -> str:
    """Who decided, as audited: the approver, and the rule inside it that decided, if named."""
    return actor if by is None else f"{actor}:{by}"
