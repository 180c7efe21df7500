"""A service process for the pruning tests: `python cursor_server.py PORT DSN` serves
`worker_agent` on the PostgreSQL store at DSN, with a token, on 127.0.0.1:PORT, and reads the
store's event log only when one of its own runs moves (`poll_s` of an hour): what another
process writes meanwhile is not sent to its stream clients, so they still need it."""

from __future__ import annotations

import sys

import uvicorn
import worker_agent

from loopstate import PostgresStore
from loopstate.service import Service, create_app

TOKEN = "test-token-123"


def main(port: int, dsn: str) -> None:
    store = PostgresStore(dsn)
    service = Service({"worker": worker_agent.agent(store)}, store=store, token=TOKEN, poll_s=3600)
    uvicorn.run(create_app(service), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
