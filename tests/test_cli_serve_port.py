"""`loopstate serve` and its port, as a first hour meets it: a second server on a port in use
says so in one line (and prints no address that another server answers), and `--port 0`
prints the port it actually took. Real `loopstate serve` processes on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from service_support import TESTS, TOKEN, serving
from support import forking

SERVE = ("-m", "loopstate", "serve", "--agent", "service_agent:agent")


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "LOOPSTATE_TEST_EFFECTS": str(tmp_path / "effects.txt"),
        "LOOPSTATE_TOKEN": TOKEN,
    }


def test_a_second_serve_on_a_port_in_use_says_so_in_one_line_and_prints_no_address(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as first:
        port = first.url.rpartition(":")[2]
        second = forking.run(
            [sys.executable, *SERVE, "--db", str(tmp_path / "other.db"), "--port", port],
            env=_env(tmp_path), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stdout == ""  # no address of a server that is not this one
        assert second.stderr.splitlines() == [
            f"loopstate serve: 127.0.0.1:{port} is in use (another loopstate serve?): stop it, "
            "or pass --port N (--port 0 takes a free one)"
        ]
        with first.client() as client:  # the first server is untouched
            assert client.get("/api/runs").status_code == 200


def test_serve_on_port_0_prints_the_address_it_serves(tmp_path: Path) -> None:
    process = forking.Popen(
        [sys.executable, *SERVE, "--db", str(tmp_path / "runs.db"), "--port", "0"],
        env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the server says where it is once it is bound
        found = re.fullmatch(
            r"loopstate serve: (http://127\.0\.0\.1:(\d+))/ui/\?token=<your token> "
            r"\(the token you gave\)\n",
            line,
        )
        assert found is not None, line
        assert found[2] != "0"
        with httpx.Client(base_url=found[1], headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            assert c.get("/api/runs", timeout=60).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)


def test_serve_and_worker_on_a_store_they_cannot_use_say_so_and_do_not_start(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"  # --db naming the wrong file
    notes.write_text("not a database\n")
    why = f"{notes} is not a usable loopstate store: file is not a database"
    for command in (SERVE, ("-m", "loopstate", "worker", "--agent", "service_agent:agent")):
        out = forking.run(
            [sys.executable, *command, "--db", str(notes)],
            env=_env(tmp_path), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (out.returncode, out.stdout) == (1, ""), out.stderr
        assert out.stderr.splitlines() == [f"loopstate {command[2]}: {why}"]
    assert notes.read_text() == "not a database\n"
