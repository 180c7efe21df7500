"""`loopstate demo` in a real pseudo-terminal, as a person types at it: a schema-breaking edit
is asked again, Ctrl-C and Ctrl-D at the prompt abort the run cleanly, a deny is announced;
Ctrl-C mid-run interrupts it (one line) and `loopstate resume` continues it. (The demo's
process is forked by the tests' fork server onto the terminal: `forked_terminal.py`.)"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from forked_terminal import Terminal
from support import forking

PROMPT = r"\[a\]pprove, \[d\]eny, \[e\]dit arguments, a\[b\]ort\? "


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Terminal]:
    child = Terminal("loopstate", ["demo"], cwd=tmp_path, timeout=30, dimensions=(40, 200))
    child.expect(PROMPT)
    yield child
    child.close(force=True)


def finished(child: Terminal) -> str:
    """Everything the demo printed until it exited; asserts no traceback."""
    child.expect(pexpect.EOF)
    child.close()
    text: str = child.before
    assert "Traceback" not in text
    return text


def test_an_edit_that_breaks_the_schema_gets_the_field_error_and_is_asked_again(
    demo: Terminal,
) -> None:
    demo.sendline("e")
    demo.expect("new arguments as JSON: ")
    demo.sendline('{"path": "notes.md"}')
    demo.expect("content: Field required")
    demo.expect("the edit does not fit the tool's arguments; try again")
    demo.expect(PROMPT)
    demo.sendline("e")
    demo.expect("new arguments as JSON: ")
    demo.sendline('{"path": "notes.md", "content": "edited\\n"}')
    out = finished(demo)
    assert "notes.md now reads: 'edited\\n'" in out
    assert "status: done" in out
    assert demo.exitstatus == 0


def test_ctrl_c_at_the_prompt_aborts_the_run_and_the_demo_exits_at_once(
    demo: Terminal,
) -> None:
    demo.sendintr()
    out = finished(demo)
    assert "awaiting_approval → aborted" in out
    assert "stop reason: aborted: interrupted at the prompt (Ctrl-C)" in out
    assert demo.exitstatus == 0


def test_ctrl_d_at_the_prompt_aborts_the_run(demo: Terminal) -> None:
    demo.sendeof()
    out = finished(demo)
    assert "stop reason: aborted: no answer: the terminal closed" in out
    assert demo.exitstatus == 0


def test_a_deny_is_announced_before_the_loop_goes_on(demo: Terminal) -> None:
    demo.sendline("d")
    demo.expect("reason for the model: ")
    demo.sendline("keep the typo")
    out = finished(demo)
    assert "write denied (keep the typo)" in out
    assert out.index("write denied") < out.index("awaiting_approval → executing_tool")
    assert "answer: I left notes.md unchanged: the reviewer said 'keep the typo'." in out


def test_ctrl_c_mid_run_prints_one_line_and_the_run_resumes(tmp_path: Path) -> None:
    from model_server import serve, stalled

    (tmp_path / ".loopstate").mkdir()
    with serve(stalled()) as server:  # the model call hangs until the client goes away
        env = {**os.environ, "OPENAI_API_BASE": server.openai_base, "OPENAI_API_KEY": "k"}
        child = Terminal("loopstate", ["demo", "--suspend", "--model", "openai/test-model"],
                         cwd=tmp_path, env=env, timeout=60)  # fmt: skip
        server.wait_for_requests(1)
        child.sendintr()
        out = finished(child)
    assert child.exitstatus == 130
    line = out.strip().splitlines()[-1].removeprefix("^C").strip()  # the terminal's echo
    match = re.fullmatch(
        r"interrupted; resume with: loopstate resume (\w+) --agent loopstate\.demo:suspended_agent",
        line,
    )
    assert match, out
    resumed = forking.run(
        [sys.executable, "-m", "loopstate", "resume", match[1], "--agent",
         "loopstate.demo:suspended_agent"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "thinking → executing_tool" in resumed.stdout  # on from where it was interrupted
    assert "status: awaiting_approval" in resumed.stdout  # the write waits, as in the demo
