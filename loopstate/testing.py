"""The test kit: script a model's words, replay recorded runs. The documented import for tests.

    from loopstate.testing import ScriptedModel, call, calls, text

    model = ScriptedModel([call("write", {"path": "a.md"}), text("Done.")])

`ScriptedModel` plays scripted turns in order (a `str` is a final answer, a `call(...)` a turn
with one tool call, `calls(...)` a batch, `Turn` one with an expectation on its request);
`replay`, `replay_sync` and `replay_flow` run an agent or a flow against a cassette written
by a `Recorder`, and raise `ReplayDivergence` at the first difference. The pytest plugin's
`loopstate_cassette` fixture does the same for a test (see `loopstate.pytest_plugin`).

Importing this module imports no model provider (litellm) and no extra's driver.
"""

from loopstate.engine.errors import ScriptExhausted, UnexpectedRequest
from loopstate.engine.models.scripted import ScriptedModel, Turn, call, calls, text
from loopstate.engine.recording.cassette import Cassette
from loopstate.engine.recording.recorder import Recorder
from loopstate.engine.recording.replay import ReplayDivergence, ReplayModel
from loopstate.replay import replay, replay_flow, replay_sync

__all__ = [
    "Cassette",
    "Recorder",
    "ReplayDivergence",
    "ReplayModel",
    "ScriptExhausted",
    "ScriptedModel",
    "Turn",
    "UnexpectedRequest",
    "call",
    "calls",
    "replay",
    "replay_flow",
    "replay_sync",
    "text",
]
