"""``emubroker simulate SCENARIO.toml [--out DIR] [--seed N] [--real-time [--dashboard-port N]]``.

Runs the scenario's cluster and traffic on a virtual clock (:mod:`emubroker.simulate.run`) and
prints loadgen's summary, the load balancer's decisions (time, bundle, from, to, why) and where
the traces are. Exit codes: 0 when every message was received, 1 when some were lost, 2 for a
scenario that cannot be simulated (the message names the key), 4 when the traffic failed.
"""

from __future__ import annotations

import logging
import socket
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from emubroker.simulate.run import run
from emubroker.simulate.scenario import SimulationError, load_simulation
from loadgen.runner import RunError

if TYPE_CHECKING:
    import argparse

__all__ = ["main"]

EXIT_USAGE = 2


def main(args: argparse.Namespace) -> int:
    """Run the sub-command; returns the exit code."""
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    try:
        simulation = load_simulation(args.scenario)
    except SimulationError as exc:
        sys.stderr.write(f"emubroker simulate: {exc}\n")
        return EXIT_USAGE
    port = args.dashboard_port
    if port is not None and not args.real_time:
        sys.stderr.write("emubroker simulate: --dashboard-port needs --real-time\n")
        return EXIT_USAGE
    if port is not None and not 0 <= port <= 65535:
        sys.stderr.write(f"emubroker simulate: --dashboard-port {port} is not a port\n")
        return EXIT_USAGE
    if port:  # a port in use: said now, not as a failure in the middle of the run
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                sys.stderr.write(f"emubroker simulate: --dashboard-port {port}: {exc.strerror}\n")
                return EXIT_USAGE
    scenario = simulation.scenario
    seed = scenario.seed if args.seed is None else args.seed
    out = args.out or f"runs/sim-{scenario.name}-{seed}"
    console = Console(highlight=False)
    try:
        result = run(
            simulation,
            out,
            seed=seed,
            virtual=not args.real_time,
            console=console,
            # A real-time run serves the live page, on a free port unless one is named.
            dashboard_port=(port or 0) if args.real_time else None,
        )
    except RunError as exc:
        sys.stderr.write(f"emubroker simulate: {exc}\n")
        return exc.exit_code
    clock = "real" if args.real_time else "virtual"
    console.out(
        f"simulated {result.simulated_seconds:.0f} s ({clock} clock) in "
        f"{result.wall_seconds:.1f} s of wall time ({result.speedup:.1f}x)"
    )
    console.out(f"load-balancer decisions: {len(result.decisions)}")
    for decision in result.decisions:
        target = f" -> {decision.dest_broker}" if decision.dest_broker else ""
        console.out(
            f"{decision.at:8.1f}s {decision.event:<6} {decision.strategy} {decision.bundle} "
            f"{decision.source_broker}{target}: {decision.reason}"
        )
    return result.run.exit_code
