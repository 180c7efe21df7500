"""Rules reach down a tree of runs: an agent's forbidding and gating rules hold in its
sub-agents' runs (`Agent.as_tool`) and a flow's in its agent phases' runs, with each child's
own rules (the stricter wins). A call forbidden above is denied in the child and no door —
`resume()`, the CLI, HTTP — approves it; a built-in gated above waits for approval below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from service_support import in_uvicorn
from statemachine import State
from support.cli import loopstate

from loopstate import Agent, Approve, Deny, MemoryStore, Rule, ScriptedModel, SQLiteStore, tool
from loopstate.engine.errors import Forbidden
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.store import Store
from loopstate.engine.tree import pending_tree
from loopstate.machines.flows import Flow, FlowMachine, Phase
from loopstate.service import Service
from loopstate.tools.builtin import read

NO_ETC = Rule(name="no-etc", tools=["write"], arguments={"path": "/etc/*"}, forbid=True,
              reason="system files are off limits")  # fmt: skip
READS_ASK = Rule(name="reads-ask", category="read_only", decision="ask")


def writer(store: Store, written: list[str], **options: Any) -> Agent:
    @tool(needs_approval=True)
    def write(path: str, content: str) -> str:
        """Write a file."""
        written.append(path)
        return f"wrote {path}"

    batch = calls(
        call("write", {"path": "/etc/passwd", "content": "x"}, id="etc"),
        call("write", {"path": "docs/a.md", "content": "y"}, id="docs"),
    )
    return Agent(ScriptedModel([batch, "Written."]), [write], store=store, **options)


def boss(store: Store, child: Agent, **options: Any) -> Agent:
    model = ScriptedModel([call("writer", {"task": "write the files"}), "All done."])
    delegate = child.as_tool(name="writer", description="Writes files.")
    return Agent(model, [delegate], store=store, **options)


async def child_of(store: Store, run_id: str) -> str:
    (record,) = (await store.load(run_id)).calls
    assert record.child_run_id is not None
    return record.child_run_id


async def test_a_parents_forbidding_rule_denies_a_sub_agents_call_at_once() -> None:
    store, written = MemoryStore(), []
    parent = boss(store, writer(store, written), rules=[NO_ETC])
    waiting = await parent.run("write the files")
    assert [p.call_id for p in await pending_tree(store, waiting.run_id)] == ["docs"]
    child = await store.load(await child_of(store, waiting.run_id))
    etc = next(c for c in child.calls if c.call_id == "etc")
    assert (etc.status, etc.decided_by) == ("denied", "rule:no-etc")
    done = await parent.resume(waiting.run_id, {"docs": Approve()})
    assert (done.status, written) == ("done", ["docs/a.md"])


async def test_resume_cannot_approve_a_sub_agents_call_a_parents_rule_forbids() -> None:
    store, written = MemoryStore(), []
    loose = boss(store, writer(store, written))
    waiting = await loose.run("write the files")
    assert {p.call_id for p in await pending_tree(store, waiting.run_id)} == {"etc", "docs"}
    strict = loose.clone(rules=[NO_ETC])  # the parent's rules tightened while the child waits
    with pytest.raises(Forbidden, match="forbidden by rule no-etc") as refused:
        await strict.resume(waiting.run_id, {"etc": Approve(), "docs": Approve()})
    assert refused.value.rule == "no-etc"
    child_id = await child_of(store, waiting.run_id)
    assert (await store.load(child_id)).inbox == ()  # nothing was recorded
    done = await strict.resume(waiting.run_id, {"etc": Deny("no"), "docs": Approve()})
    assert (done.status, written) == ("done", ["docs/a.md"])
    assert [r.name for r in (await store.load(child_id)).rules] == ["no-etc"]


async def test_a_childs_own_rules_hold_with_its_parents_and_cannot_lift_them() -> None:
    store, written = MemoryStore(), []
    lifting = Rule(name="etc-ask", tools=["write"], arguments={"path": "/etc/*"}, decision="ask")
    child = writer(store, written, rules=[lifting, READS_ASK])
    parent = boss(store, child, rules=[NO_ETC, READS_ASK])
    waiting = await parent.run("write the files")
    kept = (await store.load(await child_of(store, waiting.run_id))).rules
    assert [r.name for r in kept] == ["no-etc", "reads-ask", "etc-ask"]  # above first, once
    assert [p.call_id for p in await pending_tree(store, waiting.run_id)] == ["docs"]


async def test_an_http_approval_of_a_sub_agents_forbidden_call_is_refused_naming_the_rule(
    tmp_path: Path,
) -> None:
    store, written = SQLiteStore(tmp_path / "runs.db"), []
    parent = boss(store, writer(store, written), rules=[NO_ETC])
    waiting = await parent.run("write the files")
    child = await store.load(await child_of(store, waiting.run_id))
    digest = next(c.digest for c in child.calls if c.call_id == "etc")
    async with in_uvicorn(Service({"boss": parent})) as url, httpx.AsyncClient(base_url=url) as c:
        refused = await c.post(
            f"/api/runs/{child.run_id}/calls/etc/decision",
            json={"decision": "approve", "digest": digest},
            headers={"Idempotency-Key": "etc"},
        )
        assert refused.status_code == 409, refused.text
        assert "forbidden by rule no-etc" in refused.json()["detail"]
    assert written == []
    assert (await store.load(child.run_id)).status == "awaiting_approval"
    store.close()


async def test_the_cli_refuses_to_approve_a_sub_agents_forbidden_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    waiting = await boss(store, writer(store, []), rules=[NO_ETC]).run("write the files")
    child = await child_of(store, waiting.run_id)
    store.close()
    done = loopstate("approve", child, "etc", "--db", str(tmp_path / "runs.db"),
                     cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "forbidden by rule no-etc" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_parents_gating_rule_makes_a_sub_agents_built_in_read_wait(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("the secret is 42\n")
    store = MemoryStore()
    model = ScriptedModel([call("read", {"path": "notes.md"}, id="r1"), "It says 42."])
    reader = Agent(model, [read], store=store, workspace=tmp_path)
    parent_model = ScriptedModel([call("reader", {"task": "read notes.md"}), "42."])
    delegate = reader.as_tool(name="reader", description="Reads files.")
    parent = Agent(parent_model, [delegate], store=store, rules=[READS_ASK])
    waiting = await parent.run("what is in notes.md?")
    (pending,) = waiting.pending
    assert (pending.tool, pending.reason) == ("read", "read needs approval (rule reads-ask)")
    assert len(model.requests) == 1  # the read has not run
    done = await parent.resume(waiting.run_id, {"r1": Approve()})
    assert (done.status, done.output) == ("done", "42.")


class Single(FlowMachine):
    work = State(initial=True)
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = work.to(done, cond="always")
    fail = failed.from_(work)
    abort = aborted.from_(work)

    def always(self, data: dict[str, Any]) -> bool:
        return True


async def test_a_flows_rules_hold_in_its_agent_phases_run() -> None:
    store, written = MemoryStore(), []
    phases = {"work": Phase(agent=writer(store, written), task="write the files")}
    waiting = await Flow(Single, phases, store=store, rules=[NO_ETC]).run("go")
    assert [p.call_id for p in await pending_tree(store, waiting.run_id)] == ["docs"]
    stored = await store.load(waiting.run_id)
    assert stored.flow is not None
    (child_id,) = stored.flow.children
    etc = next(c for c in (await store.load(child_id)).calls if c.call_id == "etc")
    assert (etc.status, etc.decided_by) == ("denied", "rule:no-etc")


async def test_a_flow_cannot_approve_what_its_rules_forbid_in_an_agent_phases_run() -> None:
    store, written = MemoryStore(), []
    phases = {"work": Phase(agent=writer(store, written), task="write the files")}
    waiting = await Flow(Single, phases, store=store).run("go")
    strict = Flow(Single, phases, store=store, rules=[NO_ETC])
    with pytest.raises(Forbidden, match="forbidden by rule no-etc"):
        await strict.resume(waiting.run_id, decisions={"etc": Approve(), "docs": Approve()})
    done = await strict.resume(waiting.run_id, decisions={"etc": Deny("no"), "docs": Approve()})
    assert (done.status, written) == ("done", ["docs/a.md"])


async def test_a_flows_gating_rule_makes_its_own_phases_built_in_read_wait(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("the secret is 42\n")
    model = ScriptedModel([call("read", {"path": "notes.md"}, id="r1"), "It says 42."])
    phase = Phase(tools=[read], model=model)
    flow = Flow(Single, {"work": phase}, store=MemoryStore(), workspace=tmp_path,
                rules=[READS_ASK])  # fmt: skip
    waiting = await flow.run("what is in notes.md?")
    assert [p.reason for p in waiting.pending] == ["read needs approval (rule reads-ask)"]
    done = await flow.resume(waiting.run_id, decisions={"r1": Approve()})
    assert done.status == "done"
