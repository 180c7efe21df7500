"""The server the deadline page tests talk to: `python deadline_inbox_server.py PORT DB`
serves, with a token, on 127.0.0.1:PORT four agents that each make one gated `publish` call:

- `expired`: due 1 min after it was asked; `soon`: 2 h 10 min after; `later`: 4 h after;
  `open`: no deadline.

Every agent's clock, and so the service's, is two hours behind the wall clock the browser
reads: the page sees `expired`'s call two hours past its deadline, `soon`'s due in 10 min and
`later`'s in 2 h, while the service's deadline watch (on the agents' clock) applies none of
them during a test, so the page is seen at rest.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import uvicorn

from loopstate import Agent, Deny, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Service, create_app

TOKEN = "test-token-123"
BEHIND_S = 7200.0
HOSTILE = "<img src=x onerror=alert(1)> news"


def behind() -> float:
    return time.time() - BEHIND_S


@tool(needs_approval=True)
def publish(text: str) -> str:
    """Publish a post."""
    return f"published {text}"


def agent(store: SQLiteStore, within: timedelta | None) -> Agent:
    model = ScriptedModel([call("publish", {"text": HOSTILE}), "Published."], by_step=True)
    late = Deny("no answer in time") if within is not None else None
    return Agent(model, [publish], store=store, clock=behind, decide_within=within, on_expiry=late)


def main(port: int, db: str) -> None:
    store = SQLiteStore(db)
    agents = {
        "expired": agent(store, timedelta(minutes=1)),
        "soon": agent(store, timedelta(hours=2, minutes=10)),
        "later": agent(store, timedelta(hours=4)),
        "open": agent(store, None),
    }
    service = Service(agents, store=store, token=TOKEN, poll_s=0.1)
    uvicorn.run(create_app(service), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
