"""pytest plugin: replay recorded runs in tests, or record them afresh.

    def test_docs_agent(loopstate_cassette):
        result = loopstate_cassette.run_sync(make_agent(), "Fix the typo in docs/index.md")
        assert result.output == "Fixed."

replays `cassettes/test_docs_agent.jsonl` next to the test file (no network, no side effects;
a changed prompt, tool or machine fails with a diff). `pytest --loopstate-record` runs the
agent for real instead (its model needs its key) and writes the cassette anew.
`await loopstate_cassette.from_step(agent, 2)` keeps the first two recorded turns, goes on
live with the agent's model and says where the run departs from the recording.
`@pytest.mark.loopstate_cassette("name")` names the cassette (`cassettes/name.jsonl`).
A divergence fails the test with its diff alone (no engine frames) and the command that
re-records it. Recording keeps its runs in memory: never in the project's `.loopstate/`.

The plugin is loaded in every pytest session where loopstate is installed, so it imports
the engine only when a test asks for the fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from loopstate.engine.messages import Message
    from loopstate.engine.result import RunResult
    from loopstate.machines.agent import Agent
    from loopstate.replay_from import Departure

MARKER = "loopstate_cassette"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--loopstate-record",
        action="store_true",
        help="run agents for real and (re)write their cassettes instead of replaying them",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(name): replay or record cassettes/<name>.jsonl next to the test"
    )


class CassetteFixture:
    """The `loopstate_cassette` fixture: `run` (or `run_sync`) replays the test's cassette,
    or records it with `--loopstate-record`."""

    def __init__(self, path: Path, recording: bool, nodeid: str = "") -> None:
        self.path = path
        self.recording = recording
        self.nodeid = nodeid

    async def run(
        self,
        agent: Agent,
        prompt: str | list[Message],
        *,
        live_tools: bool = False,
        live_approver: bool = False,
    ) -> RunResult:
        """Replay `agent` on the cassette (`live_tools`, `live_approver`: see `replay`), or
        with `--loopstate-record` run it for real and write the cassette."""
        from loopstate.engine.recording.recorder import Recorder
        from loopstate.engine.recording.replay import ReplayDivergence
        from loopstate.engine.stores.memory import MemoryStore
        from loopstate.replay import replay

        if not self.recording:
            if not self.path.exists():
                pytest.fail(f"no cassette {self.path}: record it with --loopstate-record")
            try:
                return await replay(self.path, agent, prompt=prompt, live_tools=live_tools,
                                    live_approver=live_approver)  # fmt: skip
            except ReplayDivergence as exc:
                rerecord = f"pytest --loopstate-record {self.nodeid}".rstrip()
                pytest.fail(f"{exc}\n\nIf the change is intended, re-record the cassette "
                            f"{self.path}:\n    {rerecord}", pytrace=False)  # fmt: skip
        self.path.unlink(missing_ok=True)
        recorder = Recorder(self.path, model=agent.model)
        hooks: Any = agent._options["hooks"]
        existing = [] if hooks is None else [hooks] if not isinstance(hooks, list) else hooks
        recording = agent.clone(hooks=[*existing, recorder], store=MemoryStore())
        return await recording.run(prompt)

    async def from_step(self, agent: Agent, step: int) -> Departure:
        """Serve the cassette's first `step` model turns and their tool results, then run
        `agent` live (its model, tools, approver): where the new run departs from the
        recording (`Departure`), e.g. to assert on a model or prompt change from a prefix."""
        from loopstate.replay import replay

        if not self.path.exists():
            pytest.fail(f"no cassette {self.path}: record it with --loopstate-record")
        return await replay(self.path, agent, from_step=step)

    def from_step_sync(self, agent: Agent, step: int) -> Departure:
        """`from_step` for tests that are not async."""
        from loopstate.engine.sync import blocking

        return blocking(self.from_step(agent, step), instead="loopstate_cassette.from_step(...)")

    def run_sync(
        self,
        agent: Agent,
        prompt: str | list[Message],
        *,
        live_tools: bool = False,
        live_approver: bool = False,
    ) -> RunResult:
        """`run` for tests that are not async (no pytest-asyncio needed)."""
        from loopstate.engine.sync import blocking

        coroutine = self.run(agent, prompt, live_tools=live_tools, live_approver=live_approver)
        return blocking(coroutine, instead="loopstate_cassette.run(...)")


@pytest.fixture
def loopstate_cassette(request: pytest.FixtureRequest) -> CassetteFixture:
    """`cassettes/<test name>.jsonl` next to the test file (or the name given by the
    `loopstate_cassette` marker), replayed, or recorded with `--loopstate-record`."""
    marker = request.node.get_closest_marker(MARKER)
    name = str(marker.args[0]) if marker is not None and marker.args else request.node.name
    name = name.replace("/", "_").replace("[", "_").replace("]", "")
    path = Path(request.node.path).parent / "cassettes" / f"{name}.jsonl"
    recording = bool(request.config.getoption("--loopstate-record"))
    return CassetteFixture(path, recording, request.node.nodeid)
