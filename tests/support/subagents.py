"""Tools and agents shared by the sub-agent tests (`test_subagent*`): a writer sub-agent with
a free or a gated tool, a supervisor delegating to it, a gated money transfer, priced turns."""

from __future__ import annotations

from loopstate import Agent, Approve, Usage, tool
from loopstate.engine.messages import ToolCall
from loopstate.engine.models.scripted import Turn, calls, text


def writer_tools(written: list[str]):
    @tool
    def draft(topic: str) -> str:
        """Draft a paragraph on a topic."""
        written.append(topic)
        return f"a paragraph on {topic}"

    return [draft]


def used(tokens: int) -> Usage:
    return Usage(prompt_tokens=tokens, completion_tokens=1)


def priced(item: ToolCall | str, tokens: int) -> Turn:
    turn = text(item) if isinstance(item, str) else calls(item)
    return Turn(turn.reply, turn.expect, used(tokens))


def supervisor(store, child_model, parent_model, *, direct_return=False, written=None, **kw):
    writer = Agent(child_model, writer_tools(written if written is not None else []), store=store)
    delegate = writer.as_tool(
        name="writer", description="Writes paragraphs.", direct_return=direct_return
    )
    return Agent(parent_model, [delegate], store=store, **kw), writer


def gated_writer_tools(written: list[str]):
    @tool(needs_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        written.append(text)
        return "published"

    return [publish]


def money(sent: list[int]):
    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Transfer money."""
        sent.append(amount)
        return "sent"

    return transfer


def approve_everything(requests):
    return {r.call_id: Approve() for r in requests}
