"""Stands in for ``python -m storage_stub serve``, ``python -m emubroker broker`` and the zygote.

The supervisor tests point ``ClusterSpec.python`` at a wrapper running this file, so the
supervisor spawns, watches, signals and restarts real (tiny) processes without starting brokers.
As ``-m emubroker.zygote`` it is a zygote with the real loop (``emubroker.processes.forking``)
whose children are these stand-ins, unless ``zygote.mode`` says ``exit N`` (it fails to start;
brokers are exec'd then). Under ``$FAKE_CHILD_DIR`` each child, named ``stub`` or by its binary
port:

- appends ``{"pid": ..., "ppid": ..., "sid": ..., "argv": [...]}`` as one JSON line to
  ``<name>.starts`` when it starts;
- reads ``<name>.mode`` if it exists: ``exit N`` exits with N before the ready line, ``silent``
  never prints one; otherwise it prints the ready line the real command prints and waits;
- on SIGTERM appends ``time.monotonic_ns()`` to ``<name>.stops`` and exits 0; in mode
  ``farewell`` it first prints ``<name> stopped: farewell`` a moment later (a last log line).
  SIGTERM is blocked from before its first line (``/proc/PID/status``'s ``SigBlk``) and taken
  with ``sigwait``, so one sent at any moment after the ready line is never lost.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def zygote() -> None:
    mode_file = Path(os.environ["FAKE_CHILD_DIR"]) / "zygote.mode"
    mode = mode_file.read_text().split() if mode_file.exists() else []
    if mode[:1] == ["exit"]:
        print("the zygote was told to fail", flush=True)
        sys.exit(int(mode[1]))
    from emubroker.processes.forking import READY_LINE, serve

    control = socket.socket(fileno=os.dup(0))
    print(READY_LINE, flush=True)
    serve(control, lambda args: child(["-m", "emubroker", *args]))


def child(argv: list[str]) -> int:
    directory = Path(os.environ["FAKE_CHILD_DIR"])
    is_stub = argv[:2] == ["-m", "storage_stub"]
    name = "stub" if is_stub else _option(argv, "--port")
    with (directory / f"{name}.starts").open("a") as starts:
        started = {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": argv}
        starts.write(json.dumps(started) + "\n")

    mode_file = directory / f"{name}.mode"
    mode = mode_file.read_text().split() if mode_file.exists() else []

    # SIGTERM is held pending from before the ready line and taken by ``sigwait`` below: a
    # handler with ``signal.pause()`` loses a SIGTERM that comes after its last check for
    # signals and before ``pause()`` begins (its C handler runs, ``pause()`` then sleeps on),
    # and the supervisor sends it the moment it has read the ready line: the child then ran
    # until a second SIGTERM, as the cluster stopped, 30 s later.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print("starting up", flush=True)
    if mode[:1] == ["exit"]:
        print("cannot start: it was told to fail", flush=True)
        sys.exit(int(mode[1]))
    if mode[:1] != ["silent"]:
        if is_stub:
            print(f"storage-stub ready on stub://127.0.0.1:{_option(argv, '--port')} (in memory)")
        else:
            port, admin = _option(argv, "--port"), _option(argv, "--admin-port")
            print(
                f"emubroker broker ready: service pulsar://127.0.0.1:{port} "
                f"admin http://127.0.0.1:{admin}"
            )
        sys.stdout.flush()
    signal.sigwait({signal.SIGTERM})
    with (directory / f"{name}.stops").open("a") as stops:
        stops.write(f"{time.monotonic_ns()}\n")
    if mode[:1] == ["farewell"]:
        # A broker's last log lines, written a moment after the SIGTERM (its shutdown).
        time.sleep(0.2)
        print(f"{name} stopped: farewell", flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:3] == ["-m", "emubroker.zygote"]:
        zygote()
    else:
        sys.exit(child(sys.argv[1:]))
