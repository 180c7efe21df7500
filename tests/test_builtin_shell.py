"""`bash` with real subprocesses: workspace, argv, timeouts that kill the group, output caps."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from builtin_support import invoke
from pydantic import ValidationError
from support.waiting import until

from loopstate import Agent, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.tools.builtin import ToolError, bash
from loopstate.tools.builtin.bash_tool import Report


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def gone(pid: int) -> bool:
    return await until(lambda: not alive(pid))


async def test_bash_runs_in_the_workspace_and_reports_the_exit_code(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    out = await invoke(bash, tmp_path, command="ls; pwd; echo oops >&2; exit 3")
    assert out.splitlines() == ["exit code 3", "marker.txt", str(tmp_path.resolve()), "oops"]


async def test_the_command_reaches_bash_as_one_argument_unchanged(tmp_path: Path) -> None:
    # Were the library to wrap the command in another shell string, the unbalanced quotes
    # and the expansions below would come out differently.
    out = await invoke(bash, tmp_path, command="""printf '%s|' "a'b" '$HOME' "$0" """)
    assert out == "exit code 0\na'b|$HOME|/bin/bash|"


async def test_a_timeout_kills_the_whole_group_even_a_child_ignoring_sigterm(
    tmp_path: Path,
) -> None:
    command = (
        "echo started; "
        "bash -c 'trap \"\" TERM; echo $$ > child.pid; while true; do sleep 0.05; done' & wait"
    )
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 2 s.*killed.*\nstarted"):
        await invoke(bash, tmp_path, command=command, timeout=2)
    assert time.monotonic() - started < 12  # the child never ends by itself
    assert await gone(int((tmp_path / "child.pid").read_text()))


async def test_background_jobs_end_with_the_command_instead_of_holding_it(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    out = await invoke(bash, tmp_path, command="sleep 30 & echo $! > bg.pid; echo done", timeout=5)
    assert out == "exit code 0\ndone\n"
    assert time.monotonic() - started < 12  # not the background job's 30 s
    assert await gone(int((tmp_path / "bg.pid").read_text()))


async def test_cancelling_the_call_kills_the_command(tmp_path: Path) -> None:
    call = asyncio.create_task(invoke(bash, tmp_path, command="echo $$ > sh.pid; sleep 30"))
    pidfile = tmp_path / "sh.pid"
    await until(lambda: pidfile.exists() and pidfile.read_text())  # its first act
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await gone(int(pidfile.read_text()))


async def test_bash_output_keeps_its_start_and_end_with_a_note(tmp_path: Path) -> None:
    command = "echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST"
    out = await invoke(bash, tmp_path, command=command)
    assert out.startswith("exit code 0\nFIRST\n")
    assert out.endswith("x\nLAST\n")
    assert re.search(
        r"x\n\[truncated: [\d,]+ of 100,012 characters cut here within line 2\]\nx", out
    )
    assert len(out) <= bash.max_result_chars  # so the executor does not cut it a second time


async def test_the_end_of_a_long_output_reaches_the_model_through_the_executor(
    tmp_path: Path,
) -> None:
    command = "for i in $(seq 1 20000); do echo \"line $i\"; done; echo 'Error: the cause' >&2"
    model = ScriptedModel([call("bash", {"command": command}), "ok"])
    await Agent(model, [bash], workspace=tmp_path, auto_approve=True).run("go")
    seen = model.requests[1].messages[-1].content
    assert seen.startswith("exit code 0\nline 1\nline 2\n")
    assert seen.endswith("line 20000\nError: the cause\n")
    assert seen.count("[truncated: ") == 1


async def test_credential_variables_do_not_reach_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-do-not-leak")
    monkeypatch.setenv("LOOPSTATE_PLAIN", "visible")
    out = await invoke(bash, tmp_path, command="env")
    assert "do-not-leak" not in out
    assert "LOOPSTATE_PLAIN=visible" in out


@pytest.mark.parametrize("timeout", [0, -1, 601])
def test_a_timeout_out_of_range_is_refused(timeout: float) -> None:
    with pytest.raises(ValidationError):
        bash.validate({"command": "true", "timeout": timeout})


async def test_an_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="empty"):
        await invoke(bash, tmp_path, command="  ")


DETACH = "setsid bash -c 'echo $$ > detached.pid; exec sleep 300' &"
DOUBLE_FORK = "(setsid bash -c 'echo $$ > detached.pid; exec sleep 300' &);"
WAIT_FOR_PID = "while [ ! -s detached.pid ]; do sleep 0.01; done"
# The session of the detached process and of the command's shell: they must differ, or the
# test would not show that a process outside the command's session is found.
SESSIONS = "echo $(cut -d' ' -f6 /proc/$(cat detached.pid)/stat) $(cut -d' ' -f6 /proc/$$/stat)"


@pytest.mark.parametrize("start", [DETACH, DOUBLE_FORK], ids=["setsid", "double-fork"])
async def test_a_detached_process_is_killed_when_the_command_exits(
    tmp_path: Path, start: str
) -> None:
    out = await invoke(bash, tmp_path, command=f"{start} {WAIT_FOR_PID}; {SESSIONS}")
    detached = int((tmp_path / "detached.pid").read_text())
    assert not alive(detached)  # at once: the tool returns only when it is gone
    code, sessions, _ = out.split("\n")
    assert code == "exit code 0"
    assert len(set(sessions.split())) == 2


@pytest.mark.parametrize("start", [DETACH, DOUBLE_FORK], ids=["setsid", "double-fork"])
async def test_a_detached_process_is_killed_on_timeout(tmp_path: Path, start: str) -> None:
    command = f"{start} {WAIT_FOR_PID}; echo waiting; sleep 30"
    with pytest.raises(ToolError, match=r"every process it started were killed.*\nwaiting"):
        await invoke(bash, tmp_path, command=command, timeout=3)
    assert not alive(int((tmp_path / "detached.pid").read_text()))


async def test_processes_forked_in_a_loop_are_all_killed(tmp_path: Path) -> None:
    command = "for i in 1 2 3 4 5; do setsid sleep 300 & echo $! >> pids; done; sleep 0.2"
    out = await invoke(bash, tmp_path, command=command)
    assert out == "exit code 0\n"
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 5
    assert not any(alive(pid) for pid in pids)


def test_the_result_says_which_processes_could_not_be_killed() -> None:
    report = Report(status=0, survivors=[41, 42], subreaper=True)
    assert report.cleanup() == "2 of its processes could not be killed (pids 41, 42)"
    untracked = Report(status=0, survivors=[], subreaper=False).cleanup()
    assert "cannot track processes that detach" in untracked
