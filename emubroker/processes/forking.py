"""A zygote's loop: fork a child per request on a control socket, report each child's exit.

A zygote is a process that has imported a program's modules once and then forks one child per
request, each running the program as a fresh interpreter would have after those imports
(``emubroker.zygote`` for brokers; ``emubroker.processes.zygote`` is the supervisor's side).
It forks from this loop only: no event loop and no thread exists in it, so a child starts with
nothing half-done but the imports.

The control socket carries newline-framed JSON. A request is ``{"args": [...]}`` sent with one
file descriptor (``SCM_RIGHTS``): the socket that becomes the child's stdout and stderr. Its
answer is ``{"pid": N}`` or ``{"error": "..."}``, sent before anything else about that child.
When a child exits, ``{"exit": N, "code": C}`` follows (``C`` as ``subprocess`` reports it:
negative for a signal). The loop ends when the control socket closes: the supervisor is gone.
Children outlive it, as processes the supervisor had exec'd would (each in a session of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import traceback
from collections import deque
from typing import TYPE_CHECKING, Final, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["READY_LINE", "serve"]

READY_LINE: Final = "zygote ready"
"""What a zygote prints once it has imported its modules and serves requests."""

# A request is a broker's command line: far below this. Bounds what one read takes in.
_MAX_READ: Final = 1 << 16
# One descriptor per request; a few requests could arrive in one read.
_MAX_FDS: Final = 16


def serve(control: socket.socket, run: Callable[[list[str]], int]) -> None:
    """Fork ``run(args)`` for every request on ``control`` until it closes.

    Args:
        control: The supervisor's end is the other end of this socket.
        run: What a child runs; its return value (or ``SystemExit``) is the child's exit status.
    """
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    # SIGCHLD only wakes the loop (a handler, not SIG_IGN, which would reap children unseen).
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    pending = b""
    fds: deque[int] = deque()

    def leave_loop() -> None:
        """In a child: drop what belongs to the zygote's loop."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        control.close()
        for fd in (wake_r, wake_w, *fds):
            os.close(fd)

    with selectors.DefaultSelector() as selector:
        selector.register(control, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is control:
                    data, received, _, _ = socket.recv_fds(control, _MAX_READ, _MAX_FDS)
                    if not data:
                        for fd in fds:
                            os.close(fd)
                        return
                    fds.extend(received)
                    pending += data
                    while b"\n" in pending:
                        line, _, pending = pending.partition(b"\n")
                        request = json.loads(line)
                        reply = _fork(request["args"], fds.popleft(), run, leave_loop)
                        control.sendall(json.dumps(reply).encode() + b"\n")
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    for pid, code in _reap():
                        control.sendall(json.dumps({"exit": pid, "code": code}).encode() + b"\n")


def _reap() -> list[tuple[int, int]]:
    exited: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited
        if pid == 0:
            return exited
        exited.append((pid, os.waitstatus_to_exitcode(status)))


def _fork(
    args: list[str], output: int, run: Callable[[list[str]], int], leave_loop: Callable[[], None]
) -> dict[str, object]:
    # A thread in this process would be missing from the child, with whatever it held; a
    # zygote's imports start none, and one that did is refused rather than forked.
    if threading.active_count() > 1:
        os.close(output)
        return {"error": f"the zygote runs {threading.active_count()} threads; it forks with one"}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(output)
        return {"error": f"fork failed: {exc}"}
    if pid == 0:
        _child(args, output, run, leave_loop)
    os.close(output)
    return {"pid": pid}


def _child(
    args: list[str], output: int, run: Callable[[list[str]], int], leave_loop: Callable[[], None]
) -> NoReturn:
    code = 1
    try:
        os.setsid()  # as the supervisor's exec'd children: a terminal's Ctrl-C is not for them
        leave_loop()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        code = run(args)
    except SystemExit as exc:
        code = _status(exc)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)  # never back into the zygote's loop


def _status(exc: SystemExit) -> int:
    """The exit status ``sys.exit(exc.code)`` gives an interpreter."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1
