"""A service process for the pruning tests: `python cursor_server.py PORT DSN [RETENTION_S]`
serves `worker_agent` on the PostgreSQL store at DSN, with a token, on 127.0.0.1:PORT.

Without RETENTION_S it reads the store's event log only when one of its own runs moves
(`poll_s` of an hour): what another process writes meanwhile is not sent to its stream
clients, so they still need it. With it, it prunes the log as `Service(retention_s=)` does
(at start, then hourly) and reads the log as usual."""

from __future__ import annotations

import sys

import uvicorn
import worker_agent

from loopstate import PostgresStore
from loopstate.service import Service, create_app

TOKEN = "test-token-123"


def main(port: int, dsn: str, retention_s: float | None) -> None:
    store = PostgresStore(dsn)
    agents = {"worker": worker_agent.agent(store)}
    poll_s = 3600.0 if retention_s is None else 0.25
    service = Service(agents, store=store, token=TOKEN, poll_s=poll_s, retention_s=retention_s)
    uvicorn.run(create_app(service), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None)
