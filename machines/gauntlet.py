"""The gauntlet, a worked pipeline: a writer drafts a file, two reviewers in turn pass it or
send it back with notes, until both pass or the rounds run out.

    write ─[drafted]→ style_review ─[style_passed]→ fact_review ─[facts_passed]→ done
    style_review ─[style_rejected, rounds_left]→ write
    fact_review ─[facts_rejected, rounds_left]→ write

Every phase is an agent phase: the writer and each reviewer are agents of their own (model,
instructions, tools), each phase a child run of the flow's run with a typed output (`Draft`,
`Review`). The writer's `write` needs approval, so a person sees every draft before it lands
in the workspace ("agent A writes a file, agent B reviews the file"); the reviewers can only
read. The gates are code over the typed outputs: no model decides that a draft passed. A
review that rejects the draft in the last round opens no gate, and the flow fails saying so.
Build it with `gauntlet_flow(models=..., workspace=..., store=...)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from statemachine import State

from loopstate.engine.approval import Approver, SyncApprover
from loopstate.engine.model import Model
from loopstate.engine.store import Store
from loopstate.machines.agent.agent import Agent
from loopstate.machines.flows import Flow, FlowData, FlowMachine, Output, Phase
from loopstate.tools.builtin import read, write

ROUNDS = 3
"""Drafts the writer may make before a rejection fails the flow."""


class Draft(BaseModel):
    """The draft the writer has written to the workspace."""

    path: str = Field(description="The file the draft was written to, relative to the workspace")
    summary: str = Field(description="One sentence on what the draft says")


class Review(BaseModel):
    """A reviewer's verdict on the draft."""

    approved: bool
    notes: str = Field("", description="What must change (when not approved)")


class Gauntlet(FlowMachine):
    """Writer → style reviewer → fact reviewer; a rejection sends the draft back."""

    write = State(initial=True)
    style_review = State()
    fact_review = State()
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = (
        write.to(style_review, cond="drafted")
        | style_review.to(fact_review, cond="style_passed")
        | style_review.to(write, cond=["style_rejected", "rounds_left"])
        | fact_review.to(done, cond="facts_passed")
        | fact_review.to(write, cond=["facts_rejected", "rounds_left"])
    )
    fail = failed.from_(write, style_review, fact_review)
    abort = aborted.from_(write, style_review, fact_review)

    def drafted(self, data: FlowData) -> bool:
        return "draft" in data

    def style_passed(self, data: FlowData) -> bool:
        return bool(data["style_review"]["approved"])

    def style_rejected(self, data: FlowData) -> bool:
        return not self.style_passed(data)

    def facts_passed(self, data: FlowData) -> bool:
        return bool(data["fact_review"]["approved"])

    def facts_rejected(self, data: FlowData) -> bool:
        return not self.facts_passed(data)

    def rounds_left(self, data: FlowData) -> bool:
        return int(data["round"]) < ROUNDS


def _next_round(data: FlowData) -> FlowData:
    return {**data, "round": int(data.get("round", 0)) + 1}


def _writer_task(data: FlowData) -> str:
    task = f"Write the piece asked for below to a markdown file.\n\nBrief: {data['brief']}"
    notes = [
        f"- {who}: {data[key]['notes']}"
        for who, key in (("style reviewer", "style_review"), ("fact reviewer", "fact_review"))
        if key in data and not data[key]["approved"]
    ]
    if notes:
        task += f"\n\nRound {data['round']}: revise {data['draft']['path']}. Reviewers said:\n"
        task += "\n".join(notes)
    return task


def _review_task(aspect: str) -> Any:
    def task(data: FlowData) -> str:
        draft = data["draft"]
        return (
            f"Review the {aspect} of the draft in {draft['path']} ({draft['summary']}) "
            f"against the brief: {data['brief']}"
        )

    return task


def gauntlet_flow(
    *,
    models: Mapping[str, str | Model],
    workspace: str | Path,
    store: Store | None = None,
    approver: Approver | SyncApprover | None = None,
) -> Flow:
    """The gauntlet with `models["writer"]`, `models["style"]` and `models["facts"]` (litellm
    names or model objects), writing in `workspace`. Run it with the brief in the data:
    `flow.run(brief, data={"brief": brief})`."""
    writer = Agent(
        models["writer"],
        [write],
        instructions="You are a writer. Write the file, then submit the draft.",
        workspace=workspace,
    )

    def reviewer(key: str, aspect: str) -> Agent:
        return Agent(
            models[key],
            [read],
            instructions=f"You review {aspect} only. Read the file, then submit your review.",
            workspace=workspace,
        )

    return Flow(
        Gauntlet,
        {
            "write": Phase(
                agent=writer,
                task=_writer_task,
                output=Output(Draft, key="draft"),
                on_enter=_next_round,
            ),
            "style_review": Phase(
                agent=reviewer("style", "style and clarity"),
                task=_review_task("style"),
                output=Review,
            ),
            "fact_review": Phase(
                agent=reviewer("facts", "factual accuracy"),
                task=_review_task("facts"),
                output=Review,
            ),
        },
        name="gauntlet",
        store=store,
        approver=approver,
    )
