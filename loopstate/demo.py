"""The demo scenario: a coding agent fixing a typo in a small workspace, offline.

It uses the built-in workspace tools for real (listing, reading, and writing a file, which
needs approval); only the model's words are canned. They play from a bundled cassette
(`loopstate/data/demo.jsonl`, recorded from this scenario on the approve path); where a
reviewer's deny or edit takes the run off the recording, the script answers instead.
`suspended_agent()` builds the same agent over the SQLite store for the suspend-and-resume
walk-through. `python -m loopstate.demo PATH` records the cassette anew.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopstate.engine.messages import AssistantMessage
from loopstate.engine.model import Model, ModelRequest
from loopstate.engine.models.scripted import ScriptedModel, call
from loopstate.engine.store import Store
from loopstate.machines.agent import Agent
from loopstate.tools.builtin import list_dir, read, write

TASK = "Fix the typo in notes.md."
INSTRUCTIONS = "You maintain a small project. Use the tools; ask before changing files."
NOTES = "# Notes\n\nThe agent loop is drivn by a state machine.\n"
FIXED = "# Notes\n\nThe agent loop is driven by a state machine.\n"
SUSPEND_WORKSPACE = Path(".loopstate/demo-workspace")
"""Under the project directory (see `suspend_workspace`)."""


def suspend_workspace() -> Path:
    """The `--suspend` walk-through's workspace, beside the default store: found again from
    any directory of the project."""
    from loopstate.engine.stores.location import project_dir

    return project_dir() / SUSPEND_WORKSPACE


def seed_workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(NOTES)
    (root / "app.py").write_text('print("hello")\n')
    return root


def final_answer(request: ModelRequest) -> AssistantMessage:
    """The scripted model's last turn reads what happened to its write, like a model would."""
    outcome = request.messages[-1].content or ""
    if outcome.startswith("Denied"):
        reason = outcome.partition("Reason: ")[2] or "no reason given"
        return AssistantMessage(content=f"I left notes.md unchanged: the reviewer said {reason!r}.")
    if "edited the arguments" in outcome:
        return AssistantMessage(content="notes.md now has the reviewer's edited version.")
    return AssistantMessage(content="Fixed the typo in notes.md: 'drivn' → 'driven'.")


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        [
            call("list_dir", {"path": "."}),
            call("read", {"path": "notes.md"}),
            call("write", {"path": "notes.md", "content": FIXED}),
            final_answer,
        ],
        name="demo-script",
        by_step=True,
    )


def bundled_model() -> Model:
    """The recorded demo model, with the script taking over from any divergence."""
    from loopstate.engine.recording.replay import ReplayModel

    return ReplayModel(Path(__file__).with_name("data") / "demo.jsonl", fallback=scripted_model())


def build_agent(workspace: Path, *, model: str | Model | None = None, **options: object) -> Agent:
    return Agent(
        model or bundled_model(),
        [list_dir, read, write],
        instructions=INSTRUCTIONS,
        workspace=workspace,
        **options,  # type: ignore[arg-type]
    )


def suspended_agent(store: Store | None = None) -> Agent:
    """The agent `loopstate demo --suspend` starts, rebuilt for `loopstate resume`."""
    from loopstate.engine.stores.sqlite import SQLiteStore

    return build_agent(suspend_workspace(), store=store or SQLiteStore())


async def record(path: Path) -> None:
    """Record the scenario (approve path, scripted model) into a cassette at `path`."""
    import tempfile

    from loopstate.engine.approval import Approve
    from loopstate.engine.recording.recorder import Recorder
    from loopstate.engine.stores.memory import MemoryStore

    async def approve(requests: list[Any]) -> dict[str, Any]:
        return {r.call_id: Approve() for r in requests}

    path.unlink(missing_ok=True)  # noqa: ASYNC240 (a one-off script step)
    model = scripted_model()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = seed_workspace(Path(tmp))
        agent = build_agent(workspace, model=model, store=MemoryStore(), approver=approve,
                            hooks=[Recorder(path, model=model)])  # fmt: skip
        await agent.run(TASK)


if __name__ == "__main__":
    import asyncio
    import sys

    asyncio.run(record(Path(sys.argv[1] if len(sys.argv) > 1 else "loopstate/data/demo.jsonl")))
