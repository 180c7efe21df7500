"""`loopstate diagram --run` for a run of the user's own flow, as the installed `loopstate`
command meets it: the project's module is found from the working directory (as `--agent`
finds it), the Flow or its machine class may be named, and a refusal says how to name it."""

from __future__ import annotations

import contextlib
import runpy
import subprocess
import sys
from pathlib import Path

from support import forking

FLOWS = """
from statemachine import State
from loopstate import Flow, FlowMachine, Phase
from loopstate.testing import ScriptedModel

class Support(FlowMachine):
    triage = State(initial=True)
    answer = State()
    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = triage.to(answer, cond="has_topic") | answer.to(done)
    user_replied = triage.to(triage)
    fail = failed.from_(triage, answer)
    abort = aborted.from_(triage, answer)

    def has_topic(self, data) -> bool:
        return bool(data.get("topic"))

support = Flow(Support, {
    "triage": Phase(instructions="Find out what the user needs.", waits_for_user=True),
    "answer": Phase(instructions="Help the user."),
}, models={"triage": ScriptedModel(["What do you need?"]), "answer": ScriptedModel(["Done."])})
"""
SCRIPT = str(Path(sys.executable).with_name("loopstate"))
"""The installed console script: its directory, not the working one, starts `sys.path`."""


def project(tmp_path: Path) -> tuple[Path, str]:
    """A project with `flows.py` and one run of its flow, waiting for the user."""
    root = tmp_path / "help"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'help'\n")
    (root / "flows.py").write_text(FLOWS)
    with contextlib.chdir(root):
        result = runpy.run_path(str(root / "flows.py"))["support"].run_sync("Hi")
    assert result.status == "awaiting_input"
    return root, result.run_id


def loopstate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return forking.run([sys.executable, SCRIPT, *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120)  # fmt: skip


def test_a_flow_run_is_drawn_on_the_flow_named_as_resume_names_it(tmp_path: Path) -> None:
    root, run = project(tmp_path)
    for target in ("flows:support", "flows:Support"):
        drawn = loopstate("diagram", target, "--run", run[:8], cwd=root)
        assert (drawn.returncode, drawn.stderr) == (0, ""), target
        assert "stateDiagram-v2" in drawn.stdout
        assert "triage --> answer" in drawn.stdout


def test_a_flow_run_is_drawn_where_its_phase_stands_not_where_its_loop_does(
    tmp_path: Path,
) -> None:
    root, run = project(tmp_path)  # in triage, its phase's loop done: waiting for the user
    drawn = loopstate("diagram", "flows:support", "--run", run, cwd=root)
    assert drawn.returncode == 0, drawn.stderr
    classes = [line.split()[1:] for line in drawn.stdout.splitlines()
               if line.strip().startswith("class ")]  # fmt: skip
    assert ["triage", "current"] in classes
    assert ["answer,done,failed,aborted", "unvisited"] in classes


def test_a_flow_run_drawn_without_its_flow_says_how_to_name_it(tmp_path: Path) -> None:
    root, run = project(tmp_path)
    for args in (("--run", run[:8]), ("agent", "--run", run[:8])):
        refused = loopstate("diagram", *args, cwd=root)
        assert (refused.returncode, refused.stdout) == (2, ""), args
        assert refused.stderr.splitlines() == [
            f"loopstate diagram: run {run} ran on the machine of your flow 'support', which "
            f"loopstate does not know by name: draw it with `loopstate diagram MODULE:ATTR "
            f"--run {run[:8]}`, naming the Flow (as `resume --agent` does) or its FlowMachine "
            "class"
        ]
