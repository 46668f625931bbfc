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
from typing import TYPE_CHECKING, Final, cast

from emubroker.aiohttp_loading import import_aiohttp
from emubroker.processes.forking import READY_LINE, serve

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext

BROKER_MODULES: Final = (
    "emubroker.__main__",
    "emubroker.app",
    # What ``emubroker broker`` imports when it runs (``emubroker.__main__``'s lazy imports and
    # those of a broker over the stub's metadata and bookie).
    "emubroker.metadata.etcd_url",
    "emubroker.metadata.session_loss",
    "emubroker.net.accepting",
    "storage_stub.journal",
    "storage_stub.stub_client",  # a cluster's brokers connect to its stub (standalone: not)
    "emubroker.loadbalance.strategies.shedding",
    # anyio's asyncio backend, which ``anyio.run`` imports (no loop exists until it runs).
    "anyio._backends._asyncio",
    "anyio._core._sockets",
    "anyio.streams.memory",
)
"""What the zygote imports before it forks: everything a broker imports before it serves."""


def import_broker_modules() -> None:
    """Import :data:`BROKER_MODULES`, aiohttp first, as a starting broker imports it."""
    import_aiohttp()  # its client's default CA bundle read at first use (emubroker.__main__)
    for name in BROKER_MODULES:
        importlib.import_module(name)
    # The admin routes' handlers, which a standalone broker imports at its first admin request:
    # every broker of a cluster is asked at once, and imported here they are shared.
    from emubroker.admin.routing import handlers

    handlers()


def run_broker(args: list[str]) -> int:
    """In a forked child: ``emubroker ARGS``, as ``python -m emubroker ARGS`` runs it."""
    from emubroker.__main__ import main

    main_module = sys.modules["emubroker.__main__"]
    sys.argv = [main_module.__file__ or "emubroker", *args]
    return main(args)


def warm_route_patterns() -> None:
    """Compile the admin routes' patterns into ``re``'s cache, which every child inherits.

    A broker compiles a regular expression per admin route with variables when a request is
    first matched against it (``emubroker.admin.routing``): ~15 ms of CPU over its first
    requests. ``re.compile`` keeps what it compiled (up to 512 patterns; a broker's imports and
    routes use ~250), so an app built and compiled once here, and dropped, leaves each child's
    compilations cache lookups.
    """
    from emubroker.admin import build_admin_app
    from emubroker.admin.routing import compile_patterns

    compile_patterns(build_admin_app(cast("AdminContext", None)))  # routes only: no handler runs


def main() -> None:
    # As in a starting broker (emubroker.__main__._standalone): the imports' ~200,000 objects
    # are not walked by the collector while they are made, then frozen, so that no child's
    # collector walks them (nor dirties the pages it shares with the zygote by doing so).
    gc.disable()
    import_broker_modules()
    warm_route_patterns()
    gc.freeze()
    gc.enable()
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
