"""`loadgen analyze RUN_DIR... --out REPORT_DIR`: Spark jobs over runs' traces, into a report.

Reads each run directory (a local path or any Hadoop-compatible URI: hdfs://, s3a://, ...),
runs the analyses of `loadgen.analysis.jobs` on Spark (`local[*]` unless --master says
otherwise), and writes REPORT_DIR/report.html, summary.json and tables/*.csv. Several runs
are put side by side, but runs that share a topic and overlap in time (a `loadgen produce` and
a `loadgen consume` run together, as pulsar-perf is run) are joined and analysed as one
(`loadgen.analysis.grouping`; `--join` joins all the runs given). The brokers' traces are read
from RUN_DIR/dispatch and RUN_DIR/loadbalance, or from the directories --dispatch-trace and
--loadbalance-trace name (brokers loadgen did not start write where their configuration says),
each (joined) run keeping the rows of its own time.

Exit codes: 0 report written; 2 bad arguments or a run that cannot be analysed (missing or
empty tables, an unknown schema version, --join of runs that cannot be joined); 3 Spark cannot
run here (no pyspark, no Java).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from loadgen.analysis.grouping import group_runs
from loadgen.analysis.inputs import AnalysisInputError, attach_trace, load_run
from loadgen.analysis.session import SMALL_MACHINE_CONF, AnalysisEnvironmentError, open_session

EXIT_OK = 0
EXIT_INPUT = 2
EXIT_ENVIRONMENT = 3


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadgen analyze",
        description=__doc__.split("\n")[0].split(": ", 1)[1],
        epilog="Spark defaults for small machines (override with --conf): "
        + ", ".join(f"{k}={v}" for k, v in SMALL_MACHINE_CONF.items()),
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="loadgen run directories")
    parser.add_argument("--out", required=True, metavar="REPORT_DIR", help="where the report goes")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.driver.memory=4g",
    )
    parser.add_argument(
        "--skew-threshold",
        type=float,
        default=10.0,
        metavar="POINTS",
        help="how far, in percentage points, the busiest broker's weighted usage may stand "
        "above the brokers' mean before a skew episode starts (default 10, ThresholdShedder's "
        "default threshold)",
    )
    parser.add_argument(
        "--join",
        action="store_true",
        help="analyse all the runs given as one run (a produce and a consume run of the same "
        "topics), even if their times do not overlap; runs that share a topic and overlap in "
        "time are joined without it",
    )
    for name, what in (("loadbalance", "load-balancer"), ("dispatch", "dispatch")):
        parser.add_argument(
            f"--{name}-trace",
            metavar="DIR",
            help=f"the brokers' {what} trace directory (their emubroker"
            f"{'LoadBalancer' if name == 'loadbalance' else 'Dispatch'}TraceDir), "
            f"instead of RUN_DIR/{name}; each run keeps the rows of its own time",
        )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _labels(paths: Sequence[str]) -> list[str]:
    names = [path.rstrip("/").rsplit("/", 1)[-1] or path for path in paths]
    return [name if names.count(name) == 1 else f"{name} ({i + 1})" for i, name in enumerate(names)]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.getLogger("py4j").setLevel(logging.WARNING)

    def progress(line: str) -> None:
        if not args.quiet:
            print(f"analyze: {line}", file=sys.stderr, flush=True)

    try:
        spark = open_session(args.master, dict(args.conf))
    except AnalysisEnvironmentError as exc:
        print(f"loadgen analyze: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    try:
        # Spark and matplotlib are imported only once the environment is known to work.
        from loadgen.analysis.jobs import run_jobs
        from loadgen.analysis.report import write_report

        loaded = [
            (label, load_run(spark, path))
            for label, path in zip(_labels(args.runs), args.runs, strict=True)
        ]
        results = []
        said: set[str] = set()
        for group in group_runs(loaded, join=args.join):
            for line in group.lines:
                if line not in said:
                    said.add(line)
                    print(line, flush=True)
            # Attached after joining: runs joined overlap in time, and each would take the
            # rows of the shared seconds again.
            for name in ("loadbalance", "dispatch"):
                location = getattr(args, f"{name}_trace")
                if location:
                    attach_trace(spark, group.run, name, location)
            for note in group.run.notes:
                progress(f"{group.label}: {note}")
            jobs = run_jobs(
                spark, group.run, skew_threshold=args.skew_threshold / 100, progress=progress
            )
            results.append((group.label, jobs))
        report = write_report(Path(args.out), results)
    except AnalysisInputError as exc:
        print(f"loadgen analyze: {exc}", file=sys.stderr)
        return EXIT_INPUT
    finally:
        spark.stop()
    print(f"report: {report}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
