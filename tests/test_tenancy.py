"""A run started for a tenant keeps it in its metadata, and a sub-agent's run belongs to its
top run's tenant: what the service's tenancy checks read (real SQLite file)."""

from __future__ import annotations

from pathlib import Path

from service_agent import team

from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service.tenancy import Tenancy


async def test_a_runs_tenant_is_kept_and_its_sub_agents_runs_share_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    supervisor = team(store)
    red = await supervisor.run("charge 7", tenant="red")
    plain = await supervisor.run("charge 7")
    assert (await store.load(red.run_id)).metadata["tenant"] == "red"
    states = [await store.load(r.run_id) for r in await store.list_runs()]
    [child] = [s for s in states if s.parent is not None and s.parent.run_id == red.run_id]
    tenancy = Tenancy(store)
    assert await tenancy.tenant_of(child.run_id) == "red"
    assert await tenancy.visible("red", child.run_id)
    assert not await tenancy.visible("blue", child.run_id)
    assert not await tenancy.visible("red", plain.run_id)  # a run with no tenant: not red's
    assert await tenancy.visible(None, plain.run_id)  # an identity with no tenant sees all
    assert not await tenancy.visible("red", "no-such-run")


async def test_the_compatibility_listing_shows_a_team_only_its_own_runs(tmp_path: Path) -> None:
    import httpx
    from fastapi import Request
    from service_agent import agent as pay_agent
    from service_support import in_uvicorn

    from loopstate.service import Action, Identity, Service

    people = {"ann": Identity(name="ann", tenant="red"), "bob": Identity(name="bob", tenant="blue")}

    async def authorize(request: Request, action: Action, run_id: str | None) -> Identity | str:
        return people.get(request.headers.get("x-user", ""), "http")

    store = SQLiteStore(tmp_path / "runs.db")
    pay = pay_agent(store)
    red = await pay.run("charge 7", tenant="red")  # each waits for a decision: open runs
    blue = await pay.run("charge 7", tenant="blue")
    service = Service({"agent": pay}, store=store, token="t", authorize=authorize)
    async with in_uvicorn(service) as base, httpx.AsyncClient(base_url=base) as http:
        seen = {}
        for user in ("ann", "bob", "root"):
            headers = {"authorization": "Bearer t", "x-user": user}
            got = await http.get("/api/runs", params={"compatible": "true"}, headers=headers)
            assert got.status_code == 200, got.text
            seen[user] = {item["run_id"] for item in got.json()["items"]}
    assert seen == {
        "ann": {red.run_id},
        "bob": {blue.run_id},
        "root": {red.run_id, blue.run_id},  # no team: every run
    }
