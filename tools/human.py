"""`ask_person`: a tool whose answer comes from a person, not from code on the server.

It is external (`@tool(external=True)`): when the model asks, the run suspends durably; a
person answers whenever they can — `agent.resume(run_id, results={call_id: "answer"})` or
`loopstate result RUN CALL --value '"answer"'` from any process — and the run goes on with the
answer as the call's result.
"""

from __future__ import annotations

from loopstate.tools.decorator import tool


@tool(external=True, category="human")
def ask_person(question: str) -> str:
    """Ask a person a question and wait for their answer (it may take hours).

    Args:
        question: one clear question, answerable in a sentence
    """
    raise AssertionError("an external tool's body never runs")  # pragma: no cover
