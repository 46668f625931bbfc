"""``emubroker`` command line: ``emubroker standalone [--port] [--admin-port] [--bind] [--config]``.

``emubroker admin [--admin-url URL] RESOURCE COMMAND ...`` administers a running broker over its
REST API, like ``pulsar-admin`` (see :mod:`emubroker.admin_cli`).

``standalone`` runs one broker in this process on anyio's asyncio backend (aiohttp needs it,
DESIGN.md decision 5), prints one line containing ``ready`` with the service and admin URLs once
both listen (scripts and tests wait for it), and stops cleanly on SIGINT or SIGTERM (exit code 0).
Flags override values from ``--config`` (a ``broker.conf`` properties file or TOML).
Exit codes: 0 after a signal, 1 when the broker cannot start (e.g. port in use), 2 for usage and
configuration errors.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import TYPE_CHECKING

import anyio

from emubroker import admin_cli
from emubroker.app import open_broker
from emubroker.config import ConfigError, load_config

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.config import BrokerConfig

log = logging.getLogger("emubroker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="emubroker", description="Apache Pulsar emulator")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    standalone = commands.add_parser(
        "standalone", help="run one broker (binary protocol + admin API) in this process"
    )
    standalone.add_argument(
        "--port", type=int, help="binary protocol port (brokerServicePort, default 6650; 0: any)"
    )
    standalone.add_argument(
        "--admin-port", type=int, help="admin HTTP port (webServicePort, default 8080; 0: any)"
    )
    standalone.add_argument("--bind", help="address to bind (bindAddress, default localhost)")
    standalone.add_argument("--config", help="broker.conf (properties) or .toml file")
    standalone.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    admin_cli.add_parser(commands)
    return parser


async def _standalone(config: BrokerConfig) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_broker(config) as broker:
            print(
                f"emubroker standalone ready: service {broker.service_url} "
                f"admin {broker.admin_url}",
                flush=True,
            )
            async for signum in signals:
                log.info("%s received, stopping", signal.Signals(signum).name)
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "admin":
        return admin_cli.run(args)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = load_config(
            args.config,
            overrides={
                "brokerServicePort": args.port,
                "webServicePort": args.admin_port,
                "bindAddress": args.bind,
            },
        )
    except ConfigError as exc:
        print(f"emubroker: {exc}", file=sys.stderr)
        return 2
    try:
        anyio.run(_standalone, config, backend="asyncio")
    except OSError as exc:
        print(f"emubroker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
