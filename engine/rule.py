"""A rule over tool calls: which calls it selects (tools by name, a category, a name pattern,
patterns over argument values) and how it decides them. An `ApprovalPolicy` is made of rules;
a decision given with `remember=rule` keeps one for the rest of a run ("always allow calls
matching this rule").

An agent's own rules (`Agent(rules=...)`, kept with each run) gate and forbid: a rule deciding
"ask" makes the calls it matches wait for a decision even if their tool does not ask (a
category of built-ins, an MCP server's tools, a name pattern); a rule with `forbid=True`
denies them outright, and no approval can let one run (`check_decision` refuses it, naming
the rule, whichever door it comes through).

The rules reach down a tree of runs: a sub-agent's run (`Agent.as_tool`) and a flow's agent
phase's run keep the rules of every run above them with their own (`stricter`), so no
approval gets a forbidden call run through a child, and a call gated above waits below.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from loopstate.engine.data import Frozen

if TYPE_CHECKING:
    from loopstate.engine.approval import ApprovalRequest, Decision


class Rule(Frozen):
    """Decide the calls that match: tools by name (`tools`), a `category`, or a name
    `pattern` (shell-style, e.g. `"db_*"`); all that are given must match."""

    kind: Literal["rule"] = "rule"
    name: str
    decision: Literal["approve", "deny", "ask"]
    """"ask": the call waits for a decision (an agent's gating rule; a policy passes it on)."""
    tools: tuple[str, ...] = ()
    category: str | None = None
    pattern: str | None = None
    arguments: dict[str, str] = Field(default_factory=dict)
    """Argument name → a shell-style pattern its value (as text) must match, e.g.
    `{"path": "/etc/*"}`; a call without that argument does not match."""
    forbid: bool = False
    """Deny matching calls whoever approves them (an agent's rule; it decides "deny")."""
    reason: str = ""
    """Audited with a denial, and told to the model unless `message` is set."""
    message: str | None = None
    """The exact text the model receives when this rule denies a call."""

    @model_validator(mode="before")
    @classmethod
    def _tool_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("forbid") and "decision" not in data:
            data = {**data, "decision": "deny"}
        if isinstance(data, dict) and "tools" in data:
            tools = data["tools"]
            tools = [tools] if isinstance(tools, str) or hasattr(tools, "name") else tools
            data = {**data, "tools": tuple(t if isinstance(t, str) else t.name for t in tools)}
        return data

    @model_validator(mode="after")
    def _selects_something(self) -> Rule:
        if not (self.tools or self.category or self.pattern or self.arguments):
            raise ValueError(f"rule {self.name!r} must select tools, a category or a pattern")
        if self.forbid and self.decision != "deny":
            raise ValueError(f"rule {self.name!r} forbids: its decision is 'deny'")
        return self

    def matches(self, request: ApprovalRequest, arguments: Any = None) -> bool:
        """Whether the rule selects `request` (with `arguments` instead of its own, if given:
        an edit's)."""
        given = request.arguments if arguments is None else arguments
        return (
            (not self.tools or request.tool in self.tools)
            and (self.category is None or request.category == self.category)
            and (self.pattern is None or fnmatch.fnmatchcase(request.tool, self.pattern))
            and all(_value_matches(given, k, p) for k, p in self.arguments.items())
        )

    @property
    def named(self) -> str:
        """How refusals and the audit name it: `rule <name>`."""
        return f"rule {self.name}"

    def decide(self) -> Decision:
        # imported here: a decision may carry a rule to remember (`Approve(remember=rule)`)
        from loopstate.engine.approval import Approve, Deny

        if self.decision == "approve":
            return Approve(by=self.name)
        return Deny(
            self.reason or f"denied by rule {self.name}", message=self.message, by=self.name
        )


def _value_matches(arguments: Any, name: str, pattern: str) -> bool:
    if not isinstance(arguments, Mapping) or name not in arguments:
        return False
    value = arguments[name]
    return fnmatch.fnmatchcase(value if isinstance(value, str) else str(value), pattern)


def forbidding(
    rules: Iterable[Rule], request: ApprovalRequest, arguments: Any = None
) -> Rule | None:
    """The first rule of `rules` that forbids `request` (with `arguments`, if given)."""
    return next((r for r in rules if r.forbid and r.matches(request, arguments)), None)


def gating(rules: Iterable[Rule], request: ApprovalRequest) -> Rule | None:
    """The first rule of `rules` that makes `request` wait for a decision."""
    return next((r for r in rules if r.decision == "ask" and r.matches(request)), None)


def stricter(above: Iterable[Rule], own: Iterable[Rule]) -> tuple[Rule, ...]:
    """The rules a child run keeps: those of the runs above it, then its own (one the runs
    above already hold is kept once). Every rule holds, so the stricter wins: a call that any
    of them forbids is denied whoever approves it, one that any of them gates waits for a
    decision; a child's own rule can add a gate or a ban, never lift one from above."""
    kept = tuple(above)
    return kept + tuple(r for r in own if r not in kept)
