"""An agent's own rules (`Agent(rules=...)`, kept with each run): a rule that forbids denies
the calls it matches whoever approves them — a decision from `resume()`, the CLI or HTTP is
refused naming the rule, and the tool never runs — and a rule that gates makes calls wait for
a decision even when their tool does not ask (the built-in `read`)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from service_support import in_uvicorn
from support.cli import loopstate
from support.waiting import until

from loopstate import (
    Agent,
    ApprovalPolicy,
    Approve,
    Deny,
    Edit,
    MemoryStore,
    Rule,
    ScriptedModel,
    SQLiteStore,
    tool,
)
from loopstate.engine.errors import Forbidden
from loopstate.engine.models.scripted import call, calls
from loopstate.service import Service
from loopstate.tools.builtin import read

NO_ETC = Rule(name="no-etc", tools=["write"], arguments={"path": "/etc/*"}, forbid=True,
              reason="system files are off limits")  # fmt: skip


def writing(written: list[str]):
    @tool(needs_approval=True)
    def write(path: str, content: str) -> str:
        """Write a file."""
        written.append(path)
        return f"wrote {path}"

    return [write]


def two_writes() -> ScriptedModel:
    batch = calls(
        call("write", {"path": "/etc/passwd", "content": "x"}, id="etc"),
        call("write", {"path": "docs/a.md", "content": "y"}, id="docs"),
    )
    return ScriptedModel([batch, "Done."])


async def test_a_forbidden_call_is_denied_at_once_and_no_approval_from_resume_lets_it_run() -> None:
    written: list[str] = []
    agent = Agent(two_writes(), writing(written), store=MemoryStore(), rules=[NO_ETC])
    waiting = await agent.run("write the files")
    assert [p.call_id for p in waiting.pending] == ["docs"]  # the /etc call asked no one
    state = await agent.store.load(waiting.run_id)
    etc = state.batch[0]
    assert (etc.status, etc.decided_by) == ("denied", "rule:no-etc")
    with pytest.raises(Forbidden, match="forbidden by rule no-etc: system files are off limits"):
        await agent.resume(waiting.run_id, {"etc": Approve(), "docs": Approve()})
    done = await agent.resume(waiting.run_id, {"docs": Approve()})
    assert (done.status, written) == ("done", ["docs/a.md"])
    told = next(m for m in done.messages if getattr(m, "tool_call_id", None) == "etc")
    assert "system files are off limits" in str(told.content)


async def test_rules_given_later_refuse_an_approval_of_a_call_that_waited_before_them() -> None:
    written: list[str] = []
    store = MemoryStore()
    loose = Agent(two_writes(), writing(written), store=store)
    waiting = await loose.run("write the files")
    assert {p.call_id for p in waiting.pending} == {"etc", "docs"}
    strict = loose.clone(rules=[NO_ETC])
    with pytest.raises(Forbidden) as refused:
        await strict.resume(waiting.run_id, {"etc": Approve(), "docs": Approve()})
    assert refused.value.rule == "no-etc"
    edit = Edit({"path": "/etc/hosts", "content": "z"})
    with pytest.raises(Forbidden):  # an edit into what the rule forbids is refused too
        await strict.resume(waiting.run_id, {"etc": edit, "docs": Approve()})
    assert written == []
    done = await strict.resume(waiting.run_id, {"etc": Deny("no"), "docs": Approve()})
    assert (done.status, written) == ("done", ["docs/a.md"])


async def test_an_http_approval_of_a_forbidden_call_is_refused_naming_the_rule(
    tmp_path: Path,
) -> None:
    written: list[str] = []
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(two_writes(), writing(written), store=store, rules=[NO_ETC])
    waiting = await agent.run("write the files")
    state = await store.load(waiting.run_id)
    digests = {c.call_id: c.digest for c in state.batch}
    async with in_uvicorn(Service({"writer": agent})) as url, httpx.AsyncClient(base_url=url) as c:

        async def decide(call_id: str) -> httpx.Response:
            path = f"/api/runs/{waiting.run_id}/calls/{call_id}/decision"
            body = {"decision": "approve", "digest": digests[call_id]}
            return await c.post(path, json=body, headers={"Idempotency-Key": call_id})

        refused = await decide("etc")
        assert refused.status_code == 409
        assert refused.headers["content-type"] == "application/problem+json"
        assert "forbidden by rule no-etc" in refused.json()["detail"]
        assert (await decide("docs")).status_code == 200

        async def finished() -> bool:
            """the service resumed the run to its end"""
            return (await store.load(waiting.run_id)).status == "done"

        await until(finished)
    assert written == ["docs/a.md"]
    store.close()


def test_the_cli_refuses_to_approve_a_forbidden_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(two_writes(), writing([]), store=store, rules=[NO_ETC])
    waiting = agent.run_sync("write the files")
    store.close()
    done = loopstate("approve", waiting.run_id, "etc", "--db", str(tmp_path / "runs.db"),
                     cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "forbidden by rule no-etc" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_gating_rule_makes_the_built_in_read_wait_for_approval(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("the secret is 42\n")
    model = ScriptedModel([call("read", {"path": "notes.md"}), "It says 42."])
    reads = Rule(name="reads-ask", category="read_only", decision="ask")
    agent = Agent(model, [read], store=MemoryStore(), workspace=tmp_path, rules=[reads])
    waiting = await agent.run("what is in notes.md?")
    assert waiting.status == "awaiting_approval"
    (pending,) = waiting.pending
    assert (pending.tool, pending.reason) == ("read", "read needs approval (rule reads-ask)")
    done = await agent.resume(waiting.run_id, {pending.call_id: Approve()})
    assert done.status == "done"
    assert "the secret is 42" in str(done.messages[-2].content)


async def test_an_approval_policy_passes_on_what_an_ask_rule_matches() -> None:
    written: list[str] = []
    policy = ApprovalPolicy(
        Rule(name="docs-ask", tools=["write"], pattern="wri*", decision="ask"),
        Rule(name="write-ok", tools=["write"], decision="approve"),
    )
    model = ScriptedModel([call("write", {"path": "a", "content": "b"}), "Done."])
    agent = Agent(model, writing(written), store=MemoryStore(), approver=policy)
    waiting = await agent.run("write")
    assert (waiting.status, written) == ("awaiting_approval", [])


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"name": "x", "tools": ["w"], "forbid": True, "decision": "approve"}, "its decision"),
        ({"name": "x", "forbid": True}, "must select tools"),
    ],
)
def test_a_forbidding_rule_that_cannot_forbid_is_refused_when_made(
    rule: dict[str, object], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        Rule.model_validate(rule)
