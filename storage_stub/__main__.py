"""``storage-stub``: run the bookie stub (and its metadata service) as a process.

    storage-stub serve [--port 3181] [--bind HOST] [--data-dir DIR]
                       [--fsync always|batch|never] [--fsync-window-ms MS] [--faults FILE]

Prints one line containing ``ready`` (with the ``stub://`` URL) once it accepts connections,
so supervisors and tests can wait for it. SIGINT/SIGTERM stop it cleanly: the journals are
flushed and fsynced before it exits. Exit status 1 means it could not start (port in use, data
directory locked, corrupted journal: the message names the file and offset).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from functools import partial
from typing import TYPE_CHECKING

import anyio

from storage_stub.faults import load_fault_config
from storage_stub.journal import FsyncPolicy, JournalError
from storage_stub.server import DEFAULT_PORT, serve_stub

if TYPE_CHECKING:
    from collections.abc import Sequence

    from storage_stub.server import StubAddress

logger = logging.getLogger("storage_stub")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="storage-stub", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve ledgers and metadata over TCP")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    serve.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--data-dir", help="journal directory (durable mode); default: in memory")
    serve.add_argument(
        "--fsync",
        choices=[p.value for p in FsyncPolicy],
        default=FsyncPolicy.BATCH.value,
        help="when an acknowledged write is fsynced (default: batch)",
    )
    serve.add_argument(
        "--fsync-window-ms", type=float, default=2.0, help="batch window (default: 2 ms)"
    )
    serve.add_argument("--faults", help="fault configuration file (.json or .toml)")
    serve.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    return parser


async def _serve(args: argparse.Namespace) -> None:
    faults = load_fault_config(args.faults) if args.faults else None
    async with anyio.create_task_group() as tg:
        address: StubAddress = await tg.start(
            partial(
                serve_stub,
                args.bind,
                args.port,
                data_dir=args.data_dir,
                fsync=FsyncPolicy(args.fsync),
                batch_window=args.fsync_window_ms / 1000.0,
                faults=faults,
            )
        )
        mode = f"data dir {args.data_dir}, fsync {args.fsync}" if args.data_dir else "in memory"
        print(f"storage-stub ready on {address.url} ({mode})", flush=True)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                logger.info("stopping on %s", signal.Signals(signum).name)
                tg.cancel_scope.cancel()
                break


def _startup_errors(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for sub in group.exceptions for leaf in _startup_errors(sub)]
    return [group]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``storage-stub`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        anyio.run(_serve, args)
    except KeyboardInterrupt:
        pass
    except (OSError, RuntimeError, JournalError, ValueError, BaseExceptionGroup) as exc:
        errors = _startup_errors(exc)
        if not all(
            isinstance(e, (OSError, RuntimeError, JournalError, ValueError)) for e in errors
        ):
            raise
        for error in errors:
            print(f"storage-stub: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
