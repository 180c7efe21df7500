"""Replaying a recorded run's sub-agents: each call that delegated replays its child run
from the child's own cassette (`child_cassette`, written by the parent's `Recorder`), with
its recorded model turns and tool results: no network, no side effects, no LLM."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from loopstate.engine.recording.cassette import Cassette, child_cassette
from loopstate.engine.recording.replay import ReplayDivergence, ReplayModel, stand_in_tools
from loopstate.engine.tool import Tool
from loopstate.machines.agent import Agent
from loopstate.machines.agent.delegation import AgentTool


@dataclass
class ChildReplays:
    """The sub-agents of one replay: where their cassettes are, and their replay models (to
    report a child's divergence)."""

    path: Path | None
    live_tools: bool = False
    models: list[ReplayModel] = field(default_factory=list)

    def tapes(self) -> list[Cassette]:
        """Every child cassette of the recording (children's children too)."""
        if self.path is None:
            return []
        found = sorted(self.path.parent.glob(f"{self.path.stem}--*{self.path.suffix}"))
        return [Cassette.load(p) for p in found]

    def tools(self, tape: Cassette, real: Sequence[Tool] | None, path: Path | None) -> list[Tool]:
        """`tape`'s stand-in tools (or the real ones with `live_tools`), a sub-agent's tool
        replaying its recorded child runs."""
        stand_ins = {t.name: t for t in stand_in_tools(tape, real)}
        if real is None or path is None:
            return list(stand_ins.values())
        chosen: list[Tool] = []
        for t in real:
            if isinstance(t, AgentTool) and t.agent is not None:
                chosen.append(replace(t, replayed=self._replayer(t.agent, path)))
            else:
                chosen.append(t if self.live_tools else stand_ins[t.name])
        return chosen

    def _replayer(self, agent: Agent, path: Path) -> Callable[[str], Agent]:
        def replaying(call_id: str) -> Agent:
            where = child_cassette(path, call_id)
            if not where.exists():
                raise ReplayDivergence(0, f"no recorded sub-agent run for call {call_id}")
            tape = Cassette.load(where)
            model = ReplayModel(tape)
            self.models.append(model)
            tools = self.tools(tape, list(agent.tools), where)
            return agent.clone(model=model, tools=tools, hooks=None)

        return replaying

    def divergence(self) -> ReplayDivergence | None:
        """The first divergence a child's replay met, if any."""
        return next((m.divergence for m in self.models if m.divergence is not None), None)
