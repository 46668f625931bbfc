"""``emubroker`` command line: ``emubroker standalone [--port] [--admin-port] [--config] ...``.

``--tls`` adds the TLS ports with a throwaway CA and certificates (printed with their paths).

``emubroker admin [--admin-url URL] RESOURCE COMMAND ...`` administers a running broker over its
REST API, like ``pulsar-admin`` (see :mod:`emubroker.admin_cli`).

``emubroker dashboard RUN_DIR`` serves the dashboard over a recorded run (see
:mod:`emubroker.dashboard.cli`).

``emubroker cluster [-n N] ...`` runs a local cluster of broker processes around one
``storage-stub`` process, and ``emubroker cluster status|kill|start|stop`` controls it from
another shell (see :mod:`emubroker.cluster.cli`).

``standalone`` runs one broker in this process on anyio's asyncio backend (aiohttp needs it,
DESIGN.md decision 5), prints one line containing ``ready`` with the service and admin URLs once
both listen (scripts and tests wait for it), and stops cleanly on SIGINT or SIGTERM (exit code 0).
Flags override values from ``--config`` (a ``broker.conf`` properties file or TOML).
Exit codes: 0 after a signal, 1 when the broker cannot start (e.g. port in use), 2 for usage and
configuration errors.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import tempfile
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.config import ConfigError, load_config

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from emubroker.config import BrokerConfig

log = logging.getLogger("emubroker")

# ``admin``, ``cluster`` and ``dashboard`` keep their arguments with their modules
# (emubroker.admin_cli, emubroker.cluster.cli, emubroker.dashboard.cli), which are imported only
# when their command runs: a starting broker would otherwise pay for the admin CLI's and the
# supervisor's imports (PyJWT and cryptography among them), and the supervisor for aiohttp and
# the replay (docs/performance.md). Other commands list them with these lines of help.
ADMIN_HELP = "administer a running broker over its REST API (like pulsar-admin)"
CLUSTER_HELP = "run a local cluster: a storage-stub process and N broker processes"
DASHBOARD_HELP = "serve the dashboard over a recorded run (docs/dashboard.md)"

SERVING_GC_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation once a broker serves (see
``_standalone``; Python's default is 700)."""


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top has only -h)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; a command with its own module has its arguments only when run.

    Args:
        command: The command to run; None (``-h``, or no command) builds every command's parser.
    """
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
        "--tls",
        action="store_true",
        help="serve pulsar+ssl:// and https:// too (brokerServicePortTls 6651, webServicePortTls "
        "8443 unless configured), with a throwaway CA and certificates made for this run",
    )
    standalone.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    standalone.add_argument(
        "--data-dir",
        help="keep ledgers and metadata durable in DIR (hosts the stub in-process); "
        "default: in memory",
    )
    standalone.add_argument(
        "--fsync",
        default="batch",
        choices=["always", "batch", "never"],
        help="journal fsync policy with --data-dir (default batch)",
    )
    broker = commands.add_parser(
        "broker", help="run one broker against an external storage-stub (metadata + bookie)"
    )
    for action in standalone._actions:  # the same flags as standalone, minus the data dir
        if action.dest not in ("help", "data_dir", "fsync"):
            broker._add_action(action)
    broker.add_argument(
        "--metadata-url",
        required=True,
        help="stub://host:port of the metadata service, or etcd://host:port[,host:port...]"
        "[/chroot] of an etcd cluster",
    )
    broker.add_argument("--bookie-url", required=True, help="stub://host:port of the bookie stub")
    if command in (None, "admin"):
        from emubroker import admin_cli

        admin_cli.add_parser(commands)
    else:
        commands.add_parser("admin", help=ADMIN_HELP)
    if command in (None, "cluster"):
        from emubroker.cluster import cli as cluster_cli

        cluster_cli.add_parser(commands)
    else:
        commands.add_parser("cluster", help=CLUSTER_HELP)
    if command in (None, "dashboard"):
        from emubroker.dashboard import cli as dashboard_cli

        dashboard = commands.add_parser(
            "dashboard",
            help=DASHBOARD_HELP,
            description="Replay a run directory's traces (emubroker simulate, loadgen run) in the "
            "dashboard, with a time slider.",
        )
        dashboard_cli.add_arguments(dashboard)
    else:
        commands.add_parser("dashboard", help=DASHBOARD_HELP)
    simulate = commands.add_parser(
        "simulate",
        help="run a loadgen scenario's cluster and traffic in this process on a virtual clock",
        description="Run a scenario's brokers, bookie stub and traffic in this process on a "
        "virtual clock: a ten-minute load-balancing experiment in seconds, with the same "
        "traces every run (docs/simulate.md).",
    )
    # The arguments live with the command (emubroker.simulate.cli), which is imported only
    # when it runs: it brings in loadgen and trio.
    simulate.add_argument("scenario", help="a loadgen scenario file with cluster.start")
    simulate.add_argument("--out", help="run directory (default runs/sim-<name>-<seed>)")
    simulate.add_argument("--seed", type=int, help="overrides the scenario's seed")
    simulate.add_argument(
        "--real-time",
        action="store_true",
        help="run on the host's clock, to compare, and serve the live dashboard on a free "
        "loopback port (a virtual-clock run has no live page: it runs faster than anyone "
        "could watch; replay it with 'emubroker dashboard RUN_DIR')",
    )
    simulate.add_argument(
        "--dashboard-port",
        type=int,
        help="the live dashboard's port on 127.0.0.1 (with --real-time; default: a free one)",
    )
    simulate.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level of the brokers (default WARNING)",
    )
    return parser


async def _standalone(config: BrokerConfig, args: argparse.Namespace) -> None:
    # The cyclic collector is off while the broker starts: importing and building it allocates
    # ~200,000 objects that live as long as the process, which the collector would otherwise walk
    # again at every full collection (~8 % of the start-up's CPU). Once the broker serves they are
    # frozen (never walked again) and collection resumes, with a larger youngest generation:
    # every message allocates a few tracked objects (commands, tuples, entry records), so the
    # default (a collection every 700) walked the survivors ~15 times per 1,000 messages, ~8 % of
    # the broker's CPU per unbatched message (docs/performance.md); its garbage is acyclic and
    # freed by reference counting either way, so a collection every 10,000 costs no memory.
    gc.disable()
    try:
        await _serve(config, args)
    finally:
        gc.enable()


async def _serve(config: BrokerConfig, args: argparse.Namespace) -> None:
    # Imported here, not at the top: the broker's modules take ~0.5 s of CPU to import, which
    # ``emubroker cluster`` and its control commands, which only spawn or signal brokers, would
    # otherwise pay before doing anything (bench/cluster_startup.py, docs/performance.md).
    from emubroker.aiohttp_loading import import_aiohttp

    import_aiohttp()  # first: its client's default CA bundle is read at first use, not now
    from emubroker.app import open_broker, open_storage
    from emubroker.metadata.session_loss import stop_on_session_loss
    from emubroker.net.accepting import raise_open_files_limit
    from storage_stub.journal import FsyncPolicy

    raise_open_files_limit()  # as the JVM does: every connection and journal file is one
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_storage(
                data_dir=getattr(args, "data_dir", None),
                fsync=FsyncPolicy(getattr(args, "fsync", "batch")),
                metadata_url=getattr(args, "metadata_url", None),
                bookie_url=getattr(args, "bookie_url", None),
                session_timeout=config.metadataStoreSessionTimeoutMillis / 1000.0,
            ) as (metadata, ledgers),
            # Losing the external metadata session stops the broker, as in Pulsar.
            stop_on_session_loss(metadata) if metadata is not None else nullcontext() as guard,
            open_broker(
                config,
                metadata=metadata,
                ledgers=ledgers,
                alone=args.command == "standalone",
            ) as broker,
        ):
            if guard is not None:
                guard.serving()
            tls = " ".join(filter(None, (broker.service_url_tls, broker.admin_url_tls)))
            endpoints = [("service", broker.service_url), ("admin", broker.admin_url)]
            print(ready_line(args.command, [*endpoints, ("tls", tls)]), flush=True)
            print(f"dashboard: {broker.admin_url or broker.admin_url_tls}/dashboard/", flush=True)
            gc.freeze()
            gc.set_threshold(SERVING_GC_THRESHOLD, *gc.get_threshold()[1:])
            gc.enable()
            async for signum in signals:
                log.info("%s received, stopping", signal.Signals(signum).name)
                # Graceful: hand every bundle over before the session (and its locks) ends.
                await broker.shutdown()
                return


def ready_line(command: str, endpoints: Iterable[tuple[str, str]]) -> str:
    """``emubroker COMMAND ready: LABEL URL ...``, the line scripts and tests wait for.

    Each endpoint is a label and its URL(s), in order; one whose URL is empty is left out. A new
    endpoint is one more pair at the end: readers (``emubroker.cluster.supervisor``, the test
    helpers) find the fields they know by their labels and ignore what follows.
    """
    fields = " ".join(f"{label} {url}" for label, url in endpoints if url)
    return f"emubroker {command} ready: {fields}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(_command(argv)).parse_args(argv)
    if args.command == "admin":
        from emubroker import admin_cli

        return admin_cli.run(args)
    if args.command == "cluster":
        from emubroker.cluster import cli as cluster_cli

        return cluster_cli.run(args)
    if args.command == "dashboard":
        from emubroker.dashboard import cli as dashboard_cli

        return dashboard_cli.run(args)
    if args.command == "simulate":
        try:
            from emubroker.simulate import cli as simulate_cli
        except ModuleNotFoundError as exc:
            if exc.name != "trio":
                raise
            # trio is an extra: the simulator's loop is trio's (docs/simulate.md).
            sys.stderr.write("emubroker simulate needs trio: pip install 'emubroker[trio]'\n")
            return 2
        return simulate_cli.main(args)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Imported here for the reason given in _standalone.
    from emubroker.metadata import MetadataStoreError
    from emubroker.metadata.etcd_url import is_etcd_url, parse_etcd_url
    from emubroker.metadata.session_loss import MetadataSessionLostError

    # The exit stack holds ``--tls``'s scratch directory, made only then: a directory per start
    # would pile up in /tmp from every run ended by SIGKILL, when nothing can remove it.
    with ExitStack() as scratch:
        try:
            config = load_config(
                args.config,
                overrides={
                    "brokerServicePort": args.port,
                    "webServicePort": args.admin_port,
                    "bindAddress": args.bind,
                },
            )
            if getattr(args, "tls", False):
                directory = scratch.enter_context(
                    tempfile.TemporaryDirectory(prefix="emubroker-tls-")
                )
                config = _with_local_tls(config, Path(directory))
        except ConfigError as exc:
            print(f"emubroker: {exc}", file=sys.stderr)
            return 2
        data_dir = getattr(args, "data_dir", None)
        if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
            print(f"emubroker: --data-dir {data_dir} is not a directory", file=sys.stderr)
            return 2
        metadata_url = getattr(args, "metadata_url", None)
        if metadata_url is not None and is_etcd_url(metadata_url):
            try:
                parse_etcd_url(metadata_url)
            except ValueError as exc:
                print(f"emubroker: {exc}", file=sys.stderr)
                return 2
        try:
            anyio.run(_standalone, config, args, backend="asyncio")
        except MetadataSessionLostError:
            return 1  # the broker logged why when it stopped
        except (OSError, RuntimeError, MetadataStoreError) as exc:
            print(f"emubroker: cannot start: {exc}", file=sys.stderr)
            return 1
        except ConfigError as exc:
            print(f"emubroker: {exc}", file=sys.stderr)
            return 2
    return 0


def _with_local_tls(config: BrokerConfig, directory: Path) -> BrokerConfig:
    """``--tls``: fresh certificates in ``directory``, TLS ports on, paths printed."""
    from emubroker.auth.certs import write_local_certificates  # see _standalone's imports

    certs = write_local_certificates(directory)
    print(
        f"emubroker: TLS certificates for this run in {directory} (removed on exit): "
        f"CA {certs.ca_cert}, client certificate {certs.client_cert} and key "
        f"{certs.client_key} (CN admin)",
        flush=True,
    )
    return msgspec.structs.replace(
        config,
        brokerServicePortTls=(
            6651 if config.brokerServicePortTls is None else config.brokerServicePortTls
        ),
        webServicePortTls=8443 if config.webServicePortTls is None else config.webServicePortTls,
        tlsCertificateFilePath=str(certs.broker_cert),
        tlsKeyFilePath=str(certs.broker_key),
        tlsTrustCertsFilePath=str(certs.ca_cert),
    )


if __name__ == "__main__":
    sys.exit(main())
