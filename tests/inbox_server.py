"""The server the inbox page tests talk to: `python inbox_server.py PORT DB WORKSPACE
MODEL_BASE` serves, with a token, on 127.0.0.1:PORT

- `agent`: service_agent's (a gated `charge` and a gated `send_email`, then an answer);
- `writer`: writes notes.md of WORKSPACE with the built-in `write` (gated), then answers;
- `flaky`: a litellm model at MODEL_BASE (the test's model server): its first call fails
  with a 503, so the run rests in `model_failed` until someone retries it.

Who asks is the `X-User` header or the `user` cookie: ann and bob are two teams' deciders,
vic views ann's team's runs without deciding, cy is a third team's, anyone else is `http`
with no team (sees all).
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import Request
from service_agent import agent as pay_agent

from loopstate import Agent, ScriptedModel
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Action, Identity, Service, create_app
from loopstate.tools.builtin import write

TOKEN = "test-token-123"
PEOPLE = {
    "ann": Identity(name="ann", tenant="red"),
    "bob": Identity(name="bob", tenant="blue"),
    "vic": Identity(name="vic", tenant="red", roles=("viewer",)),
    "cy": Identity(name="cy", tenant="green"),
}
HOSTILE = "# Notes\n\n<img src=x onerror=alert(1)> is now fixed.\n"


async def authorize(request: Request, action: Action, run_id: str | None) -> Identity | str:
    user = request.headers.get("x-user") or request.cookies.get("user") or ""
    return PEOPLE.get(user, "http")


def main(port: int, db: str, workspace: str, model_base: str) -> None:
    import threading

    from loopstate.engine.models.litellm import _import_litellm

    # litellm's import takes seconds (a minute on a loaded machine): begun at once, beside
    # serving, so that the flaky agent's first run seldom waits for it
    threading.Thread(target=_import_litellm, daemon=True).start()

    store = SQLiteStore(db)
    script = ScriptedModel(
        [call("write", {"path": "notes.md", "content": HOSTILE}), "notes.md is fixed"],
        by_step=True,
    )
    agents = {
        "agent": pay_agent(store),
        "writer": Agent(script, [write], workspace=workspace, store=store),
        "flaky": Agent(
            LiteLLMModel("openai/m", api_base=model_base, api_key="sk-test"), store=store
        ),
    }
    service = Service(agents, store=store, token=TOKEN, authorize=authorize, poll_s=0.1)
    uvicorn.run(create_app(service), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
