"""The agent `tests/test_service_pages_external.py` serves: its model asks, in one batch, a
person a question (`ask_person`, a string answer) and the browser to pick (a typed result);
then thanks. Both are external tools: no body runs on the server."""

from __future__ import annotations

from pydantic import BaseModel

from loopstate import Agent, MemoryStore, ScriptedModel, Store, tool
from loopstate.engine.models.scripted import call, calls
from loopstate.tools.human import ask_person


class Choice(BaseModel):
    colour: str
    count: int


@tool(external=True)
def pick_in_browser(prompt: str) -> Choice:
    """Let the user pick in their browser (a client-side tool)."""
    raise AssertionError("an external tool's body never runs")


def agent(store: Store | None = None) -> Agent:
    script = [
        calls(
            call("ask_person", {"question": "<img src=x onerror=alert(1)> ship it?"}),
            call("pick_in_browser", {"prompt": "pick a colour and a count"}),
        ),
        "thanks",
    ]
    return Agent(
        ScriptedModel(script, by_step=True),
        [ask_person, pick_in_browser],
        store=store if store is not None else MemoryStore(),
    )
