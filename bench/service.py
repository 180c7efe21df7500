"""The HTTP service with the scripted model, as ratios against floors measured in the same run.

    python bench/service.py [RUNS]

1. Runs/s started through `POST /api/agents/{name}/runs` on a `loopstate serve` process
   (SQLite), each answering in one step, until all are done; the floor is the same runs
   started with `Agent.run` in this process on a SQLite file.
2. p50/p99 latency from a transition (its stored time) to its delivery on the run's SSE
   stream, with 100 runs streaming at once (each waits on a gated call; all are approved);
   the floor is the p50 of a `GET /api/runs/{id}` round trip.
3. Memory of the server process with 1,000 open SSE clients (`/api/events`), per client,
   against the idle server's RSS.
Everything on 127.0.0.1; every loop bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from loopstate import Agent, MemoryStore, ScriptedModel, Store, tool
from loopstate.testing import call

HERE = Path(__file__).parent
TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@tool(needs_approval=True)
def publish(item: int) -> str:
    """Publish an item: needs a decision."""
    return f"published {item}"


def answer(store: Store | None = None) -> Agent:
    """Answers at once: one model call per run."""
    return Agent(ScriptedModel(["done"], by_step=True), store=store or MemoryStore())


def gated(store: Store | None = None) -> Agent:
    """Waits on one gated call, then answers."""
    script = [call("publish", {"item": 1}), "done"]
    return Agent(ScriptedModel(script, by_step=True), [publish], store=store or MemoryStore())


def serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(HERE), "LOOPSTATE_TOKEN": TOKEN}
    args = ["--agent", "answer=service:answer", "--agent", "gated=service:gated"]
    return subprocess.Popen(
        [sys.executable, "-m", "loopstate", "serve", *args, "--db", str(db), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )


async def ready(client: httpx.AsyncClient) -> None:
    for _ in range(300):
        try:
            if (await client.get("/api/runs?limit=1")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("the server did not start")


async def runs_per_second(client: httpx.AsyncClient, runs: int) -> float:
    began = time.perf_counter()
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            assert (
                await client.post("/api/agents/answer/runs", json={"prompt": f"{i}"})
            ).is_success

    await asyncio.gather(*(one(i) for i in range(runs)))
    for _ in range(6000):
        done = (await client.get("/api/runs", params={"status": "done", "limit": 500})).json()
        if len(done["items"]) >= runs:
            break
        await asyncio.sleep(0.05)
    return runs / (time.perf_counter() - began)


async def floor_runs_per_second(db: Path, runs: int) -> float:
    from loopstate.engine.stores.sqlite import SQLiteStore

    store = SQLiteStore(db)
    agent = answer(store)
    began = time.perf_counter()
    for i in range(runs):
        await agent.run(f"{i}")
    store.close()
    return runs / (time.perf_counter() - began)


async def delivery(client: httpx.AsyncClient, streams: int) -> tuple[list[float], float]:
    ids = []
    for _ in range(streams):
        ids.append(
            (await client.post("/api/agents/gated/runs", json={"prompt": "x"})).json()["run_id"]
        )
    latencies: list[float] = []
    trips = []
    for run_id in ids[:20]:
        began = time.perf_counter()
        await client.get(f"/api/runs/{run_id}")
        trips.append(time.perf_counter() - began)

    limits = httpx.Limits(max_connections=streams + 10)
    listener = httpx.AsyncClient(base_url=str(client.base_url), limits=limits, timeout=60)

    async def follow(run_id: str) -> None:
        headers = {**HEADERS, "Last-Event-ID": "2"}  # start, reply: already stored
        async with listener.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as s:
            kind = ""
            async for line in s.aiter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                if line.startswith("data:") and kind == "transition":  # not the live deltas
                    data = json.loads(line[5:])
                    latencies.append(time.time() - data["time"])
                    if data["to"] == "done":
                        return

    followers = [asyncio.create_task(follow(r)) for r in ids]
    await asyncio.sleep(1.0)
    for run_id in ids:
        items = (await client.get("/api/approvals", params={"run_id": run_id})).json()["items"]
        for item in items:
            body = {"decision": "approve", "digest": item["digest"]}
            path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
            await client.post(path, json=body, headers={"Idempotency-Key": item["call_id"]})
    await asyncio.wait_for(asyncio.gather(*followers), 120)
    await listener.aclose()
    return latencies, statistics.median(trips)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def memory(url: str, pid: int, clients: int) -> tuple[int, int]:
    idle = rss_kb(pid)
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, limits=limits, timeout=60) as c:
        opened = asyncio.Event()
        count = 0

        async def hold() -> None:
            nonlocal count
            async with c.stream("GET", "/api/events") as s:
                count += 1
                if count == clients:
                    opened.set()
                async for _ in s.aiter_raw():
                    pass

        holders = [asyncio.create_task(hold()) for _ in range(clients)]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(1.0)
        held = rss_kb(pid)
        for h in holders:
            h.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
    return idle, held


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = 18000 + os.getpid() % 1000
        server = serve(Path(tmp) / "serve.db", port)
        url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as client:
                await ready(client)
                idle_rss = rss_kb(server.pid)
                floor = await floor_runs_per_second(Path(tmp) / "floor.db", runs)
                served = await runs_per_second(client, runs)
                print(f"runs/s over HTTP: {served:.0f} vs Agent.run {floor:.0f} in-process "
                      f"({served / floor:.2f}x)")  # fmt: skip
                lat, trip = await delivery(client, 100)
                p50, p99 = statistics.median(lat), statistics.quantiles(lat, n=100)[98]
                a, b, c = p50 * 1000, p99 * 1000, trip * 1000
                print(f"transition→SSE, 100 streams: p50 {a:.1f} ms, p99 {b:.1f} ms vs GET",
                      f"round trip p50 {c:.1f} ms ({a / c:.1f}x, {b / c:.1f}x)")  # fmt: skip
            idle, held = await memory(url, server.pid, 1000)
            per_client = (held - idle) / 1000
            print(f"1,000 SSE clients: RSS {held / 1024:.0f} MB vs idle {idle_rss / 1024:.0f} MB",
                  f"({per_client:.0f} KB per client, {held / idle_rss:.2f}x)")  # fmt: skip
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
