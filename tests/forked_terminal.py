"""`python -m MODULE ARGS...` on a pseudo-terminal of its own, driven with pexpect, as
`pexpect.spawn` gives it, but forked by the tests' fork server (`support.forking`): its
imports (loopstate, litellm) are done, not seconds of CPU again.

`Terminal` opens the pseudo-terminal and has this file run on it, forked in a session of its
own: as a script, this file makes the terminal its controlling one (so Ctrl-C typed at it is a
SIGINT to it, as `pexpect.spawn`'s child has it) and runs MODULE as `python -m` would.
"""

from __future__ import annotations

import fcntl
import os
import runpy
import sys
import termios
from pathlib import Path

from pexpect.fdpexpect import fdspawn


class Terminal(fdspawn):  # type: ignore[misc]
    """The child, its terminal's other end in `child_fd`; `exitstatus` once it is closed."""

    def __init__(self, module: str, args: list[str], *, cwd: Path,
                 env: dict[str, str] | None = None, timeout: float,
                 dimensions: tuple[int, int] = (24, 80)) -> None:  # fmt: skip
        from support import forking

        master, terminal = os.openpty()
        termios.tcsetwinsize(terminal, dimensions)
        keys = termios.tcgetattr(terminal)[6]
        self.intr, self.eof = keys[termios.VINTR], keys[termios.VEOF]
        self.process = forking.Popen(
            [sys.executable, __file__, module, *args], stdin=terminal, stdout=terminal,
            stderr=terminal, cwd=cwd, env=env, start_new_session=True,
        )  # fmt: skip
        os.close(terminal)  # the child's now: its end is the terminal's end (EOF here)
        super().__init__(master, encoding="utf-8", timeout=timeout)
        self.exitstatus: int | None = None

    def sendintr(self) -> None:
        """Ctrl-C, typed."""
        os.write(self.child_fd, self.intr)

    def sendeof(self) -> None:
        """Ctrl-D, typed."""
        os.write(self.child_fd, self.eof)

    def close(self, force: bool = False) -> None:
        if force and self.process.poll() is None:
            self.process.kill()
        self.exitstatus = self.process.wait(timeout=300)
        super().close()


def _run_here() -> None:
    """In the forked child (a session leader): take the terminal, run the module."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    module, *args = sys.argv[1:]
    sys.argv = ["-m", *args]
    sys.path[0] = os.getcwd()  # as `python -m`: the module's imports start in the directory
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _run_here()
