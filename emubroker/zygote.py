"""``python -m emubroker.zygote``: a broker's modules imported once, a broker forked per request.

``emubroker cluster`` starts this beside its stub and asks it for each broker
(``emubroker.processes.zygote``): a child forked here runs ``emubroker ARGS`` as
``python -m emubroker ARGS`` would, without importing anything again. Its control socket is its
stdin; it prints its ready line once the imports are done, and exits when the supervisor closes
the socket (docs/architecture.md, "Brokers fork from a zygote").
"""

from __future__ import annotations

import gc
import importlib
import os
import socket
import sys
from typing import Final

from emubroker.processes.forking import READY_LINE, serve

BROKER_MODULES: Final = (
    "emubroker.__main__",
    "emubroker.app",
    # What ``emubroker broker`` imports when it runs (``emubroker.__main__``'s lazy imports and
    # those of a broker over the stub's metadata and bookie).
    "emubroker.metadata.etcd_url",
    "emubroker.metadata.session_loss",
    "emubroker.net.accepting",
    "storage_stub.journal",
    "emubroker.loadbalance.strategies.shedding",
    # anyio's asyncio backend, which ``anyio.run`` imports (no loop exists until it runs).
    "anyio._backends._asyncio",
    "anyio._core._sockets",
    "anyio.streams.memory",
)
"""What the zygote imports before it forks: everything a broker imports before it serves."""


def run_broker(args: list[str]) -> int:
    """In a forked child: ``emubroker ARGS``, as ``python -m emubroker ARGS`` runs it."""
    from emubroker.__main__ import main

    main_module = sys.modules["emubroker.__main__"]
    sys.argv = [main_module.__file__ or "emubroker", *args]
    return main(args)


def main() -> None:
    for name in BROKER_MODULES:
        importlib.import_module(name)
    # The imports' objects live as long as every child: frozen, so that no child's collector
    # walks them (nor dirties the pages it shares with the zygote by doing so).
    gc.collect()
    gc.freeze()
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout.write(READY_LINE + "\n")
    sys.stdout.flush()
    with control:
        serve(control, run_broker)


if __name__ == "__main__":
    main()
