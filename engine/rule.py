"""A rule over tool calls: which calls it selects (tools by name, a category, a name pattern)
and how it decides them. An `ApprovalPolicy` is made of rules; a decision given with
`remember=rule` keeps one for the rest of a run ("always allow calls matching this rule").
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any, Literal

from pydantic import model_validator

from loopstate.engine.data import Frozen

if TYPE_CHECKING:
    from loopstate.engine.approval import ApprovalRequest, Decision


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
            tools = [tools] if isinstance(tools, str) or hasattr(tools, "name") else tools
            data = {**data, "tools": tuple(t if isinstance(t, str) else t.name for t in tools)}
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
        # imported here: a decision may carry a rule to remember (`Approve(remember=rule)`)
        from loopstate.engine.approval import Approve, Deny

        if self.decision == "approve":
            return Approve(by=self.name)
        return Deny(
            self.reason or f"denied by rule {self.name}", message=self.message, by=self.name
        )
