"""The agent `tests/test_service_hostile.py` serves (`loopstate serve --agent
service_hostile_agent:agent`): its model asks, in one batch, for a gated `charge`, a gated
`send_email` and an external `fetch_data` (any JSON object as its result); then answers."""

from __future__ import annotations

from typing import Any

from loopstate import Agent, MemoryStore, ScriptedModel, Store, tool
from loopstate.engine.models.scripted import call, calls


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge a card."""
    return f"charged {amount}"


@tool(needs_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {body}"


@tool(external=True)
def fetch_data(query: str) -> dict[str, Any]:
    """Data a client fetches and sends back (any JSON object)."""
    raise AssertionError("an external tool's body never runs")


def agent(store: Store | None = None) -> Agent:
    script = [
        calls(
            call("charge", {"amount": 5}),
            call("send_email", {"to": "ops@example.com", "body": "paid"}),
            call("fetch_data", {"query": "invoices"}),
        ),
        "all done",
        "glad to help",
    ]
    return Agent(
        ScriptedModel(script, by_step=True),
        [charge, send_email, fetch_data],
        store=store if store is not None else MemoryStore(),
    )
