"""Approval policies a team can state once: rules over a toolset, a category or a name
pattern, and chains of approvers where the first that decides wins.

Both are approvers (see `loopstate.engine.approval`): a call a policy does not decide is left
out of its answer, so it passes to the next approver of a chain, or the run suspends for a
person. Every decision a rule makes names the rule (`by`), so the audit says which rule let a
call through or stopped it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from loopstate.engine.approval import (
    ApprovalRequest,
    Approve,
    Approver,
    Decision,
    Deny,
    as_approver,
)
from loopstate.engine.data import Frozen
from loopstate.engine.errors import DefinitionError
from loopstate.engine.tool import Tool


class Rule(Frozen):
    """Decide the calls that match: tools by name (`tools`), a `category`, or a name
    `pattern` (shell-style, e.g. `"db_*"`); all that are given must match."""

    kind: Literal["rule"] = "rule"
    name: str
    decision: Literal["approve", "deny"]
    tools: tuple[str, ...] = ()
    category: str | None = None
    pattern: str | None = None
    reason: str = ""
    """Audited with a denial, and told to the model unless `message` is set."""
    message: str | None = None
    """The exact text the model receives when this rule denies a call."""

    @model_validator(mode="before")
    @classmethod
    def _tool_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "tools" in data:
            tools = data["tools"]
            tools = [tools] if isinstance(tools, str | Tool) else tools
            data = {**data, "tools": tuple(t.name if isinstance(t, Tool) else t for t in tools)}
        return data

    @model_validator(mode="after")
    def _selects_something(self) -> Rule:
        if not (self.tools or self.category or self.pattern):
            raise ValueError(f"rule {self.name!r} must select tools, a category or a pattern")
        return self

    def matches(self, request: ApprovalRequest) -> bool:
        return (
            (not self.tools or request.tool in self.tools)
            and (self.category is None or request.category == self.category)
            and (self.pattern is None or fnmatch.fnmatchcase(request.tool, self.pattern))
        )

    def decide(self) -> Decision:
        if self.decision == "approve":
            return Approve(by=self.name)
        return Deny(
            self.reason or f"denied by rule {self.name}", message=self.message, by=self.name
        )


class ApprovalPolicy(Frozen):
    """An approver made of rules: the first rule that matches a call decides it; a call no
    rule matches is passed on (left undecided)."""

    kind: Literal["policy"] = "policy"
    rules: tuple[Rule, ...] = Field(min_length=1)

    def __init__(self, *rules: Rule, **data: Any) -> None:
        BaseModel.__init__(self, rules=data.pop("rules", rules), **data)

    async def __call__(self, requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        decided: dict[str, Decision] = {}
        for request in requests:
            rule = next((r for r in self.rules if r.matches(request)), None)
            if rule is not None:
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
            decided.update({cid: d for cid, d in answer.items() if cid in known})
            if any(d.kind == "abort" for d in decided.values()):
                break
        return decided

    chained.__name__ = "chain"
    return chained
