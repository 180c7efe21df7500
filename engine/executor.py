"""The single choke point for tool calls: parse → validate → gate → decide → run → result.

Bad input never crashes a run: an unknown tool, unparsable JSON, schema errors, exceptions and
timeouts all become results that tell the model what went wrong. Only cancellation propagates.
Every result text, an error's too, is cut to the tool's `max_result_chars` by the one policy of
`truncation` (head and tail kept, a note where the middle was).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from pydantic import ValidationError

from loopstate.engine.approval import Decision, Deny, Gate, arguments_digest
from loopstate.engine.arguments import parse_arguments, thaw
from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.deadlines import deadline_for
from loopstate.engine.messages import ToolCall, ToolMessage
from loopstate.engine.rule import Rule, forbidding, gating
from loopstate.engine.sanitize import storable_text
from loopstate.engine.state import CallRecord, Deadline
from loopstate.engine.tool import AskPending, Tool, ToolContext, render_result
from loopstate.engine.truncation import truncate as truncate  # its home before truncation.py

DenialFormatter = Callable[[CallRecord, Deny], str]
"""(the denied call, the denial) → the exact text the model receives (`denial_message=`)."""
ContextFactory = Callable[[str, str], ToolContext[Any]]
"""(call_id, tool name) → the context that call's tool receives."""


class Executor:
    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        auto_approve: bool = False,
        denial_message: DenialFormatter | None = None,
        clock: Clock = system_clock,
        deadline: tuple[float | None, Any] = (None, None),
    ) -> None:
        self.tools = tools
        self.clock = clock
        self.deadline = deadline
        """The run's default `decide_within` (seconds) and `on_expiry`."""
        self.auto_approve = auto_approve
        self.denial_message = denial_message

    # -- classify a model turn's calls -------------------------------------------------------

    def prepare(
        self, calls: Sequence[ToolCall], context: ContextFactory, rules: Sequence[Rule] = ()
    ) -> list[CallRecord]:
        """The records of a model turn's calls: invalid, denied by a forbidding rule, waiting
        for a decision (their tool asks, or a gating rule does), or approved."""
        return [self._prepare_one(call, context, rules) for call in calls]

    def _prepare_one(
        self, call: ToolCall, context: ContextFactory, rules: Sequence[Rule]
    ) -> CallRecord:
        base = {
            "call_id": storable_text(call.id),
            "tool": storable_text(call.name),
            "raw_arguments": storable_text(call.function.arguments),
        }
        tool = self.tools.get(call.name)
        if tool is None:
            available = ", ".join(self.tools) or "none"
            msg = f"Error: unknown tool {call.name!r}. Available tools: {available}."
            return CallRecord(**base, status="invalid", reason=msg, result=msg)
        try:
            arguments = parse_arguments(call.function.arguments)
            args = tool.validate(arguments)
        except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
            # too deep, or a number that is not finite: refused here, reported to the model
            msg = f"Error: invalid arguments for {tool.name}: {describe_invalid(exc)}"
            return CallRecord(**base, status="invalid", reason=msg, result=msg)
        digest = arguments_digest(tool.name, arguments)
        # values checked above (`arguments` parsed read-only): not validated again, and kept
        # as a dict: the run keeps the copies made as the call is decided and run
        record = CallRecord.fleeting(
            **base, arguments=arguments, digest=digest, status="approved", metadata={}
        )
        # what rules match on (made only if there are rules: a step's most frequent work)
        request = record.request().evolve(category=tool.category) if rules else None
        if request is not None and (forbidden := forbidding(rules, request)) is not None:
            record, actor = record.evolve(category=tool.category), f"rule:{forbidden.name}"
            return self.decide(record, forbidden.decide(), actor=actor, at=self.clock())
        if tool.external:  # never auto-approved: only a supplied result completes it
            return record.model_copy(
                update={
                    "status": "awaiting",
                    "reason": f"{tool.name} waits for its result from outside",
                    "external": True,
                    "result_schema": tool.result_adapter.json_schema(),
                    "allowed": tool.allowed_decisions,
                    "category": tool.category,
                }
            )
        metadata: dict[str, Any] = {}
        try:  # a predicate is handed the call's context; a fixed answer needs none
            needs = tool.needs_approval
            gated = (
                needs if isinstance(needs, bool) else tool.gated(args, context(call.id, tool.name))
            )
            reason = f"{tool.name} needs approval"
            if isinstance(gated, Gate):
                reason, metadata = storable_text(gated.description), gated.metadata
        except Exception as exc:  # a broken predicate must not let a call through
            gated, reason = True, f"{tool.name}'s approval check raised {exc!r}"
        if not gated and request is not None and (rule := gating(rules, request)) is not None:
            gated, reason = True, f"{tool.name} needs approval ({rule.named})"
        if not gated:
            return record
        if self.auto_approve:
            return record.model_copy(update={"reason": reason, "decided_by": "auto_approve"})
        return record.model_copy(
            update={
                "status": "awaiting",
                "reason": reason,
                "parameters": tool.definition.parameters,
                "allowed": tool.allowed_decisions,
                "category": tool.category,
                "metadata": metadata,
                "deadline": self._deadline(tool),
            }
        )

    def _deadline(self, tool: Tool) -> Deadline | None:
        within, on_expiry = self.deadline
        if tool.decide_within is not None:
            within, on_expiry = tool.decide_within, tool.on_expiry
        return deadline_for(within, on_expiry, self.clock())

    def recover(self, record: CallRecord, *, ask_again: bool) -> CallRecord:
        """A call found `running` after its process died: re-run it if its tool is idempotent;
        otherwise ask for a decision again, or tell the model its outcome is unknown."""
        tool = self.tools.get(record.tool)
        if tool is not None and tool.idempotent:
            return record.model_copy(update={"status": "approved"})
        if ask_again:
            reason = f"{record.tool} was interrupted before it finished; run it again?"
            return record.model_copy(
                update={"status": "awaiting", "reason": reason, "decision": None}
            )
        text = (
            f"Error: interrupted, outcome unknown. The process running {record.tool} stopped "
            "before it finished, and it was not run again: check its effect before retrying."
        )
        return record.model_copy(update={"status": "interrupted", "result": text})

    # -- decisions ---------------------------------------------------------------------------

    def decide(
        self, record: CallRecord, decision: Decision, *, actor: str, at: float
    ) -> CallRecord:
        """The call once `decision` is applied to it: a decision `check_decision` has let
        through (`loopstate.engine.decision_check`); nothing is checked here."""
        update: dict[str, Any] = {"decision": decision, "decided_by": actor, "decided_at": at}
        match decision.kind:
            case "approve" | "edit":
                update["status"] = "approved"
            case "deny":
                update["status"] = "denied"
                update["result"] = self._denial_text(record, decision)
            case "abort":
                update["status"] = "denied"
                update["result"] = f"Aborted: {decision.reason}"
            case "result" if record.asking:  # the answer to `ctx.ask`: the body runs again
                update |= {"status": "approved", "asking": False, "external": False,
                           "answers": (*record.answers, decision.value)}  # fmt: skip
                if record.decision is not None and record.decision.kind == "edit":
                    del update["decision"]  # what runs again is what the reviewer edited
            case "result":
                update["status"] = "succeeded"
                update["result"] = self._supplied(record, decision.value)
        return record.model_copy(update=update)

    def _supplied(self, record: CallRecord, value: Any) -> str:
        """A supplied result (checked) as the model's text, as the tool's result type reads it."""
        tool = self.tools.get(record.tool)
        if tool is None:
            return truncate(storable_text(render_result(value)), 20_000)
        value = tool.result_adapter.validate_python(value)
        return truncate(storable_text(render_result(value)), tool.max_result_chars)

    def _denial_text(self, record: CallRecord, decision: Deny) -> str:
        """What the model is told of a denial: the decision's own `message`, else the run's
        formatter, else a note quoting the reason."""
        if decision.message is not None:
            return storable_text(decision.message)
        if self.denial_message is not None:
            return storable_text(self.denial_message(record, decision))
        return f"Denied: the reviewer did not allow this call. Reason: {decision.reason}"

    # -- run ---------------------------------------------------------------------------------

    async def run(self, record: CallRecord, ctx: ToolContext[Any]) -> CallRecord:
        """Run an approved call with its tool's timeout and retries; never raises but for
        cancellation. Returns the record with its final status and result text.

        A call runs with exactly the arguments that were approved: if they no longer match
        the digest they were approved under, it fails without running."""
        tool = self.tools[record.tool]
        if tool.external:  # defence: an external tool's body never runs on the server
            text = f"Error: {tool.name} is external; no result was supplied."
            return record.model_copy(update={"status": "failed", "result": text})
        changed = _changed_since_approval(record)
        if changed is not None:
            return record.model_copy(update={"status": "failed", "result": changed, "attempts": 0})
        # the tool gets its own mutable copy: nothing it does reaches the record
        args = tool.validate(thaw(record.executed_arguments or {}))
        # every tool's context: one that declares none may still ask through it (an MCP
        # server's tool asks the person what its server elicits)
        ctx = _call_context(record, ctx)
        attempts = 0
        while True:
            attempts += 1
            try:
                async with _time_limit(tool.timeout):
                    text = await tool.invoke(args, ctx)
                status, text = "succeeded", storable_text(text)
                break
            except AskPending as ask:
                return _asking(record, tool, ask)
            except TimeoutError:
                status, text = "failed", f"Error: {tool.name} timed out after {tool.timeout:g} s."
            except Exception as exc:
                error = storable_text(f"{type(exc).__name__}: {exc}")
                status, text = "failed", f"Error: {tool.name} raised {error}"
            if attempts > tool.retries:
                break
        text = truncate(text, tool.max_result_chars)  # errors too: a traceback can be long
        return record.evolve(status=status, result=text, attempts=attempts)  # values made here


def _call_context(record: CallRecord, ctx: ToolContext[Any]) -> ToolContext[Any]:
    """`ctx` with what the call's record holds for its tool: the data of the decision that
    let it run, the answers to its questions so far (`ctx.ask`), none asked yet."""
    data = getattr(record.decision, "data", None)
    more = {"decision_data": thaw(data)} if data else {}
    return dataclasses.replace(ctx, answers=record.answers, _asked=[0], **more)


def _time_limit(seconds: float | None) -> AbstractAsyncContextManager[object]:
    """A tool's timeout; none (not `asyncio.timeout(None)`, which costs a step's share) for
    a tool without one."""
    return nullcontext() if seconds is None else asyncio.timeout(seconds)


def _asking(record: CallRecord, tool: Tool, ask: AskPending) -> CallRecord:
    """`record` waiting for the answer to its tool's question, as an external call waits."""
    if not tool.asks:
        text = f"Error: {tool.name} called ctx.ask but is not declared @tool(asks=True)."
        return record.model_copy(update={"status": "failed", "result": text})
    return record.model_copy(
        update={
            "status": "awaiting",
            "asking": True,
            "external": True,
            "reason": storable_text(ask.question),
            "result_schema": ask.schema,
            "allowed": ("deny", "abort", "result"),
        }
    )


def _changed_since_approval(record: CallRecord) -> str | None:
    """Why `record` must not run (its arguments differ from those approved), or None."""
    if not record.digest or record.arguments is None:
        return None
    actual = arguments_digest(record.tool, record.arguments)
    if actual == record.digest:
        return None
    return (
        f"Error: {record.tool} was not run: its arguments changed after they were approved "
        f"(digest {actual}, approved {record.digest}); ask for the call again"
    )


def describe_invalid(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "arguments"
            parts.append(f"{where}: {err['msg']}")
        return "; ".join(parts)
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    return str(exc)


def result_message(record: CallRecord) -> ToolMessage:
    """What the model is told of a call: its result, led by a note when a reviewer's edit is
    what ran (the record keeps the decision; the note is derived from it, never parsed)."""
    text = record.result or ""
    decision = record.decision
    if decision is not None and decision.kind == "edit" and record.status in _RAN:
        edited = json.dumps(thaw(decision.arguments), sort_keys=True)
        text = f"[The reviewer edited the arguments; this ran with {edited}]\n{text}"
    return ToolMessage.trusted(tool_call_id=record.call_id, content=text)  # a run keeps each


_RAN = ("succeeded", "failed")
