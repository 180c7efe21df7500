"""Approval policies a team can state once: rules over a toolset, a category or a name
pattern, and chains of approvers where the first that decides wins.

Both are approvers (see `loopstate.engine.approval`): a call a policy does not decide is left
out of its answer, so it passes to the next approver of a chain, or the run suspends for a
person. Every decision a rule makes names the rule (`by`), so the audit says which rule let a
call through or stopped it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from loopstate.engine.approval import (
    ApprovalRequest,
    Approver,
    Decision,
    as_approver,
    as_decision,
)
from loopstate.engine.data import Frozen
from loopstate.engine.errors import DefinitionError
from loopstate.engine.rule import Rule

__all__ = ["ApprovalPolicy", "Rule", "chain_approvers"]


class ApprovalPolicy(Frozen):
    """An approver made of rules: the first rule that matches a call decides it; a call no
    rule matches, or that a rule deciding "ask" matches first, is passed on (left
    undecided)."""

    kind: Literal["policy"] = "policy"
    rules: tuple[Rule, ...] = Field(min_length=1)

    def __init__(self, *rules: Rule, **data: Any) -> None:
        BaseModel.__init__(self, rules=data.pop("rules", rules), **data)

    async def __call__(self, requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        decided: dict[str, Decision] = {}
        for request in requests:
            rule = next((r for r in self.rules if r.matches(request)), None)
            if rule is not None and rule.decision != "ask":
                decided[request.call_id] = rule.decide()
        return decided


def chain_approvers(*approvers: object) -> Approver:
    """One approver asking `approvers` in turn: each sees only the calls still undecided, and
    the first that decides a call wins (an `Abort` stops the chain)."""
    if not approvers:
        raise DefinitionError("chain_approvers needs at least one approver")
    adapted = [as_approver(a) for a in approvers]

    async def chained(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        decided: dict[str, Decision] = {}
        for approver in adapted:
            undecided = [r for r in requests if r.call_id not in decided]
            if not undecided:
                break
            answer = await approver(undecided)
            known = {r.call_id for r in undecided}
            decided.update({cid: as_decision(d) for cid, d in answer.items() if cid in known})
            if any(d.kind == "abort" for d in decided.values()):
                break
        return decided

    chained.__name__ = "chain"
    return chained
