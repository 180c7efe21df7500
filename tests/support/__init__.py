"""Small tools and helpers shared by the engine tests. Every tool execution is counted."""

from __future__ import annotations

import asyncio
from collections import Counter

from loopstate import Tool, ToolContext, tool

executions: Counter[str] = Counter()


def make_tools() -> tuple[Counter[str], list[Tool]]:
    """Fresh tools with their own execution counter: read (free), write (gated), pay
    (gated when amount >= 100), slow (times out), boom (raises)."""
    counted: Counter[str] = Counter()

    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: path inside the workspace
        """
        counted["read_file"] += 1
        return f"contents of {path}"

    @tool(needs_approval=True)
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        counted["write_file"] += 1
        return f"wrote {len(content)} bytes to {path}"

    @tool(needs_approval=lambda args: args.amount >= 100)
    async def pay(amount: int, ctx: ToolContext[None]) -> str:
        """Pay an amount in cents."""
        counted["pay"] += 1
        return f"paid {amount} (key {ctx.idempotency_key})"

    @tool(timeout=0.05)
    async def slow() -> str:
        """Never finishes in time."""
        counted["slow"] += 1
        await asyncio.sleep(5)
        return "late"

    @tool
    def boom(x: int) -> str:
        """Raises."""
        counted["boom"] += 1
        raise ValueError(f"bad x {x}")

    return counted, [read_file, write_file, pay, slow, boom]


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge a card."""
    return f"charged {amount}"


def db_tools(ran: list[str]) -> list[Tool]:
    """Gated tools by category: db_read and db_drop ("db"), send_mail ("mail"); each run is
    appended to `ran` ("read a", "drop a", "mail x@y.z")."""

    @tool(needs_approval=True, category="db")
    def db_read(table: str) -> str:
        """Read a table."""
        ran.append(f"read {table}")
        return f"rows of {table}"

    @tool(needs_approval=True, category="db")
    def db_drop(table: str) -> str:
        """Drop a table."""
        ran.append(f"drop {table}")
        return f"dropped {table}"

    @tool(needs_approval=True, category="mail")
    def send_mail(to: str) -> str:
        """Send mail."""
        ran.append(f"mail {to}")
        return "sent"

    return [db_read, db_drop, send_mail]
