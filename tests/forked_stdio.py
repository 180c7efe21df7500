"""`python -I -S forked_stdio.py SOCKET PRELOAD SCRIPT ARGS...`: SCRIPT, forked by the tests'
fork server (`support/forkserver.py`, listening on SOCKET, PRELOAD: the modules it imports
once for all such children, comma-separated), on this process's stdin, stdout and stderr.

For a program that starts `python SCRIPT` itself (the MCP SDK starts a stdio server so): it
starts this instead, a bare interpreter that imports nothing, and SCRIPT's imports are the
server's. SCRIPT's process is a real one, on the very pipes this process was given: their
other end sees SCRIPT's output, and its end (SCRIPT exits or is killed, stdin closes) as it
would. This process waits for SCRIPT and exits as it did; a SIGTERM sent to it (a program
stopping its child) goes on to SCRIPT.
"""

import json
import os
import signal
import socket
import sys


def main() -> None:
    path, preload, *argv = sys.argv[1:]
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "new_session": False,
               "preload": [name for name in preload.split(",") if name]}  # fmt: skip
    body = json.dumps(request).encode()
    child: list[int] = []
    termed: list[int] = []

    def term(signum: int, _: object) -> None:
        termed.append(signum)
        for pid in child:
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, term)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.connect(path)
        socket.send_fds(server, [len(body).to_bytes(8, "big")], [0, 1, 2])
        server.sendall(body)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # SCRIPT holds the pipes now: their ends are its own
            os.dup2(quiet, fd)
        child.append(int(line(server)))
        if termed:
            os.kill(child[0], termed[0])
        status = int(line(server))
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


def line(server: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        part = server.recv(1)
        if not part:
            raise SystemExit("the fork server ended")
        data += part
    return data.decode()


if __name__ == "__main__":
    main()
