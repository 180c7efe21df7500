"""The built wheel, installed into a fresh virtualenv in another directory, runs the README's
quick start there against a real model server, and its `loopstate` command finds the run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from model_server import serve, text_reply, tool_call_reply
from support.wheel import InstalledWheel

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_readme_quick_start_runs_from_the_installed_wheel(
    installed_wheel: InstalledWheel, tmp_path: Path
) -> None:
    bin_dir = installed_wheel.bin
    project = tmp_path / "myproject"
    (project / "docs").mkdir(parents=True)
    (project / "docs/index.md").write_text("Helo\n")
    example = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]
    (project / "quickstart.py").write_text(example)
    with serve(
        tool_call_reply(("c1", "write_file", {"path": "docs/index.md", "content": "Hello\n"})),
        text_reply("Fixed the typo."),
    ) as server:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OPENAI_API_BASE": f"{server.url}/v1",
               "OPENAI_API_KEY": "sk-test", "HOME": str(tmp_path)}  # fmt: skip
        out = subprocess.run([bin_dir / "python", "quickstart.py"], cwd=project, env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "done: Fixed the typo."
    assert (project / "docs/index.md").read_text() == "Hello\n"

    def loopstate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["loopstate", *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    version = loopstate("--version")
    assert version.stdout.strip() == "loopstate 0.1.0", version.stderr
    listed = loopstate("runs", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[2:] == ["done", "-", "2", "Fix", "the", "typo",
                                                         "in", "docs/index.md"]  # fmt: skip
    demo = loopstate("demo", "--yes")  # its recording is package data of the wheel
    assert demo.returncode == 0, demo.stderr
    assert "answer: Fixed the typo in notes.md" in demo.stdout
