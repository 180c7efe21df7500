"""The process that owns one `bash` command and every process it starts, and ends them all.

`bash_tool` runs this file as a script (`python -I -S shell_supervisor.py COMMAND`); it imports
only the standard library. It marks itself a child subreaper (Linux `prctl`), so a process the
command detaches (`setsid`, a double fork) is reparented to it when its parent exits, instead
of to init: nothing the command starts can leave its tree. It then runs `/bin/bash -c COMMAND`
with stdin from /dev/null and stdout and stderr on its own stdout.

When bash exits, when its own stdin (the control pipe held by the tool) closes, or on SIGTERM,
it SIGKILLs every descendant, found through /proc, until none is left, reaps them, and writes
one JSON line on stderr: `{"status": bash's wait status or null, "survivors": [pids still
alive after KILL_S], "subreaper": whether orphans could be kept in the tree}`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
KILL_S = 2.0  # how long killing may take before the processes left are reported


def main(command: str) -> int:
    subreaper = become_subreaper()
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    stop: list[bool] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    pid = spawn(command)
    status = wait_for(pid, wake_read, stop)
    survivors = kill_descendants(time.monotonic() + KILL_S)
    report = {"status": status, "survivors": survivors, "subreaper": subreaper}
    sys.stderr.write(json.dumps(report) + "\n")
    return 0


def become_subreaper() -> bool:
    """Make orphaned descendants reparent to this process (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux, or no prctl
        return False


def spawn(command: str) -> int:
    default = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM)
    return os.posix_spawn(
        "/bin/bash",
        ["/bin/bash", "-c", command],
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsigdef=default,  # Python ignores SIGPIPE; a shell pipeline must not
        setsigmask=(),
    )


def wait_for(pid: int, wake_read: int, stop: list[bool]) -> int | None:
    """The wait status of bash once it exits; None if told to stop first (control pipe closed or
    SIGTERM). Orphans that exit meanwhile are reaped."""
    while not stop:
        status = reap(pid)
        if status is not None:
            return status
        readable, _, _ = select.select([0, wake_read], [], [])
        if 0 in readable and not os.read(0, 512):
            return None  # the tool closed the control pipe, or died
        with contextlib.suppress(BlockingIOError):
            os.read(wake_read, 512)
    return None


def reap(pid: int | None) -> int | None:
    """Collect every exited child; `pid`'s wait status if it was among them."""
    found = None
    while True:
        try:
            child, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if child == 0:
            return found
        if child == pid:
            found = status


def kill_descendants(deadline: float) -> list[int]:
    """SIGKILL every live descendant until none is left (one killed mid-fork leaves a child
    for the next round), reaping as they die; the pids still alive at `deadline`."""
    while True:
        reap(None)
        alive = descendants(os.getpid())
        if not alive or time.monotonic() > deadline:
            return sorted(alive)
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def descendants(root: int) -> set[int]:
    """Live (not zombie) processes below `root`, from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
