"""`loadgen`: produce, consume or run a scenario against a Pulsar cluster, tracing every message.

    loadgen produce TOPIC... [-r RATE] [-s SIZE] [-n PRODUCERS] [-np PARTITIONS] [-time SECONDS]
    loadgen consume TOPIC... [-ss SUBSCRIPTION] [-st TYPE] [-n CONSUMERS] [-q QUEUE] [-r RATE]
    loadgen run SCENARIO.toml
    loadgen analyze RUN_DIR... --out REPORT_DIR [--master URL] [--conf KEY=VALUE]

`produce` and `consume` take `pulsar-perf`'s flags; `run` runs a scenario file (phases, timed
events); `analyze` turns runs' traces into a report with Spark (the `spark` extra). `produce`,
`consume` and `run` take --trace-dir (default runs/<run-id>/), --trace-sample, --workers,
--client native|official, --histogram-file and --allow-loss.

Exit codes: 0 success; 1 messages were lost (acknowledged by the broker, never received);
2 bad flags or scenario; 3 the cluster could not be started or reached; 4 the run failed
(a worker died or a client failed); 130 interrupted before the run started.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Literal

import anyio
from rich.console import Console

from loadgen.durations import Seconds
from loadgen.runner import EXIT_USAGE, RunError, RunOptions, run_scenario
from loadgen.scenario import (
    Batching,
    Cluster,
    ConsumerGroup,
    Keys,
    Phase,
    ProducerGroup,
    Scenario,
    ScenarioError,
    Topic,
    check,
    load_scenario,
)

SUBSCRIPTION_TYPES = {
    "exclusive": "Exclusive",
    "shared": "Shared",
    "failover": "Failover",
    "key_shared": "Key_Shared",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # argparse's is NoReturn
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _keys(text: str) -> Keys:
    """`none`, `round-robin[:K]`, `random:K`, `zipf:K[:S]`."""
    parts = text.split(":")
    kind = parts[0].replace("-", "_")
    try:
        if kind == "none" and len(parts) == 1:
            return Keys()
        if kind in ("round_robin", "random") and len(parts) <= 2:
            distribution: Literal["round_robin", "random"] = (
                "random" if kind == "random" else "round_robin"
            )
            return Keys(distribution=distribution, count=int(parts[1]) if len(parts) > 1 else 100)
        if kind == "zipf" and 2 <= len(parts) <= 3:
            return Keys(
                distribution="zipf",
                count=int(parts[1]),
                s=float(parts[2]) if len(parts) > 2 else 1.1,
            )
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"expected none, round-robin[:K], random:K or zipf:K[:S], got {text!r}"
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run options")
    group.add_argument("--trace-dir", help="where traces go (default runs/<run-id>/)")
    group.add_argument(
        "--trace-sample",
        type=_fraction,
        default=1.0,
        help="fraction of messages with a trace row, 0 to 1 (default 1: every message)",
    )
    group.add_argument(
        "--workers", type=_positive_int, default=1, help="worker processes (default 1)"
    )
    group.add_argument(
        "--client", choices=["native", "official"], default="native", help="client library"
    )
    group.add_argument("--histogram-file", help="also write the HdrHistogram latency log here")
    group.add_argument(
        "--allow-loss", action="store_true", help="report lost messages without failing"
    )
    group.add_argument(
        "--stats-interval", type=float, default=10.0, help="seconds between console lines"
    )
    group.add_argument(
        "--no-dashboard", action="store_true", help="console lines even on a terminal"
    )


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-u", "--service-url", default="pulsar://localhost:6650", help="broker service URL"
    )
    parser.add_argument(
        "--admin-url",
        default="http://localhost:8080",
        help="admin REST URL, to create partitioned topics (-np) ('' for none)",
    )
    parser.add_argument(
        "-time", "--test-duration", type=float, default=0.0, help="seconds (0: until Ctrl-C)"
    )
    parser.add_argument(
        "--warmup-time", type=float, default=1.0, help="seconds left out of the totals"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="loadgen", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    produce = commands.add_parser("produce", help="produce to topics, as pulsar-perf produce")
    produce.add_argument("topics", nargs="+", metavar="TOPIC")
    produce.add_argument(
        "-r", "--rate", type=float, default=100.0, help="msg/s in total (0: as fast as possible)"
    )
    produce.add_argument(
        "-s", "--size", type=int, default=1024, help="message size in bytes (>= 40)"
    )
    produce.add_argument(
        "-n", "--num-producers", type=_positive_int, default=1, help="producers per topic"
    )
    produce.add_argument(
        "-np", "--partitions", type=int, default=0, help="create partitioned topics"
    )
    produce.add_argument(
        "-m", "--num-messages", type=int, default=0, help="stop after N messages (0: no limit)"
    )
    produce.add_argument(
        "-b", "--batch-time-window", type=float, default=1.0, help="batch delay in ms"
    )
    produce.add_argument(
        "-bm", "--batch-max-messages", type=int, default=1000, help="messages per batch"
    )
    produce.add_argument(
        "-bb", "--batch-max-bytes", type=int, default=128 * 1024, help="bytes per batch"
    )
    produce.add_argument(
        "-db", "--disable-batching", action="store_true", help="send each message alone"
    )
    produce.add_argument(
        "-o",
        "--max-outstanding",
        type=_positive_int,
        default=1000,
        help="pending sends per producer",
    )
    produce.add_argument(
        "-k",
        "--keys",
        type=_keys,
        default=Keys(),
        help="none, round-robin[:K], random:K, zipf:K[:S]",
    )
    produce.add_argument("--poisson", action="store_true", help="exponential gaps between sends")
    _connection(produce)
    _common(produce)
    consume = commands.add_parser("consume", help="consume from topics, as pulsar-perf consume")
    consume.add_argument("topics", nargs="+", metavar="TOPIC")
    consume.add_argument("-ss", "--subscriptions", default="sub", help="subscription name")
    consume.add_argument(
        "-st",
        "--subscription-type",
        type=str.lower,
        choices=sorted(SUBSCRIPTION_TYPES),
        default="exclusive",
    )
    consume.add_argument(
        "-n", "--num-consumers", type=_positive_int, default=1, help="consumers per topic"
    )
    consume.add_argument("-q", "--receiver-queue-size", type=_positive_int, default=1000)
    consume.add_argument(
        "-r", "--rate", type=float, default=0.0, help="ack at most this many msg/s (0: no limit)"
    )
    consume.add_argument(
        "-p", "--subscription-position", choices=["latest", "earliest"], default="latest"
    )
    _connection(consume)
    _common(consume)
    run = commands.add_parser("run", help="run a scenario file (phases and timed events)")
    run.add_argument("scenario", metavar="SCENARIO.toml")
    run.add_argument("-u", "--service-url", help="use this cluster instead of the scenario's")
    run.add_argument("--admin-url", help="with --service-url: the cluster's admin URL")
    _common(run)
    commands.add_parser(
        "analyze",
        help="Spark analysis of runs into a report (loadgen analyze --help)",
        add_help=False,
    )
    return parser


def _duration(seconds: float) -> Seconds:
    return Seconds(seconds if seconds > 0 else math.inf)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario a `produce` or `consume` command line describes."""
    cluster = Cluster(service_url=args.service_url, admin_url=args.admin_url or None)
    phase = Phase(name="run", duration=_duration(args.test_duration))
    if args.command == "produce":
        count = len(args.topics)
        producers = [
            ProducerGroup(
                name=f"produce-{i}" if count > 1 else "produce",
                topic=topic,
                count=args.num_producers,
                rate=args.rate / count,
                size=args.size,
                keys=args.keys,
                batching=Batching(
                    enabled=not args.disable_batching and args.batch_time_window > 0,
                    max_delay_ms=args.batch_time_window,
                    max_messages=args.batch_max_messages,
                    max_bytes=args.batch_max_bytes,
                ),
                max_outstanding=args.max_outstanding,
                messages=args.num_messages // count if args.num_messages else 0,
                arrivals="poisson" if args.poisson else "uniform",
            )
            for i, topic in enumerate(args.topics)
        ]
        topics = (
            [Topic(name=t, partitions=args.partitions) for t in args.topics]
            if args.partitions
            else []
        )
        scenario = Scenario(
            name="produce",
            cluster=cluster,
            topics=topics,
            producers=producers,
            phases=[phase],
            warmup=Seconds(args.warmup_time),
        )
    else:
        consumers = [
            ConsumerGroup(
                name=f"consume-{i}" if len(args.topics) > 1 else "consume",
                topic=topic,
                subscription=args.subscriptions,
                type=SUBSCRIPTION_TYPES[args.subscription_type],  # type: ignore[arg-type]  # a Literal value
                count=args.num_consumers,
                receiver_queue=args.receiver_queue_size,
                ack_rate=args.rate * args.num_consumers,
                initial_position=args.subscription_position,
            )
            for i, topic in enumerate(args.topics)
        ]
        scenario = Scenario(
            name="consume",
            cluster=cluster,
            consumers=consumers,
            phases=[phase],
            warmup=Seconds(args.warmup_time),
        )
    return check(scenario)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["analyze"]:
        return _analyze(arguments[1:])
    args = build_parser().parse_args(arguments)
    try:
        if args.command == "run":
            scenario = load_scenario(args.scenario)
            if args.service_url:
                cluster = Cluster(service_url=args.service_url, admin_url=args.admin_url)
                scenario = check(msgspec_replace(scenario, cluster))
        else:
            scenario = scenario_from_args(args)
    except ScenarioError as exc:
        print(f"loadgen: {exc}", file=sys.stderr)
        return EXIT_USAGE
    console = Console(highlight=False)
    options = RunOptions(
        workers=args.workers,
        client=args.client,
        trace_dir=args.trace_dir,
        trace_sample=args.trace_sample,
        histogram_file=args.histogram_file,
        allow_loss=args.allow_loss,
        stats_interval=args.stats_interval,
        dashboard=console.is_terminal and not args.no_dashboard,
        scenario_file=getattr(args, "scenario", None),
        command=["loadgen", *(sys.argv[1:] if argv is None else argv)],
    )
    try:
        result = anyio.run(run_scenario, scenario, options, console, backend="asyncio")
    except RunError as exc:
        print(f"loadgen: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("loadgen: interrupted", file=sys.stderr)
        return 130
    return result.exit_code


def _analyze(argv: list[str]) -> int:
    # By name, not by an import statement: the analysis needs the optional `spark` extra, and
    # nothing in loadgen imports it (pyproject.toml's import contracts).
    import importlib

    module = importlib.import_module("loadgen.analysis.__main__")
    exit_code: int = module.main(argv)
    return exit_code


def msgspec_replace(scenario: Scenario, cluster: Cluster) -> Scenario:
    import msgspec

    return msgspec.structs.replace(scenario, cluster=cluster)


if __name__ == "__main__":
    sys.exit(main())
