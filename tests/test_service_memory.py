"""Server memory stays flat while 20 clients send 50 MB bodies without a token (issue 26): a
real `loopstate serve` answers 401 before reading a body, so its resident memory, read from
/proc while the bodies are being sent, never grows by what they carry."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from service_support import start, stop

CLIENTS = 20
BODY_MB = 50
CHUNK = b"x" * (1024 * 1024)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def test_memory_stays_flat_while_20_clients_send_50_mb_without_a_token(tmp_path: Path) -> None:
    server = start(tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "serve.log")
    pid = server.process.pid
    seen: list[float] = []

    def body() -> Iterator[bytes]:
        for n in range(BODY_MB):
            if n % 5 == 0:
                seen.append(rss_mb(pid))  # measured while the bodies are on their way
            yield CHUNK

    def send(i: int) -> int | None:
        with httpx.Client(base_url=server.url, timeout=60) as anonymous:
            headers = {"Content-Type": "application/json", "Content-Length": str(BODY_MB << 20)}
            try:
                return anonymous.post(
                    "/api/agents/agent/runs", content=body(), headers=headers
                ).status_code
            except httpx.TransportError:
                return None  # the server answered and closed before the body was sent

    try:
        with server.client() as client:  # warm: the first requests load what serving needs
            for _ in range(3):
                assert client.get("/api/runs").status_code == 200
        before = rss_mb(pid)
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(send, range(CLIENTS)))
        after = rss_mb(pid)
    finally:
        stop(server)
    assert set(answers) <= {401, None}, answers
    assert 401 in answers
    peak = max([*seen, after])
    print(f"server RSS: {before:.0f} MB before, {peak:.0f} MB peak, {after:.0f} MB after")
    assert peak - before < 25, (before, peak, after)
