"""Latency percentiles: the same numbers as Spark's `percentile` over every row, exactly."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.traces import T0_NS, RunBuilder

pytestmark = [
    pytest.mark.spark,
    # pyspark leaves its result sockets to the garbage collector (see conftest.py).
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket"),
]


def _latencies(rng: random.Random) -> float:
    """Seconds: mostly a few ms, ties, a long tail, zero and (clock skew) negative ones."""
    pick = rng.random()
    if pick < 0.2:
        return rng.choice((0.002, 0.0031, 0.015))  # many equal values
    if pick < 0.22:
        return rng.choice((0.0, -0.0004, 0.000_001, 0.000_031, 0.000_032))
    if pick < 0.25:
        return rng.uniform(0.5, 40.0)  # a tail across many octaves
    return rng.expovariate(1 / 0.003)


def test_percentiles_equal_sparks_percentile_over_every_row(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    from loadgen.analysis.inputs import load_run
    from loadgen.analysis.jobs import run_jobs
    from loadgen.analysis.latency import PERCENTILES

    rng = random.Random(7)
    run = RunBuilder(tmp_path / "run", phases=[("a", 1.3), ("b", 2.0)])
    run.subscription("t", "s", "Shared")
    for i in range(6000):
        at = rng.uniform(0.0, 3.3)
        run.send("t", i, at, latency=_latencies(rng))
        run.receive("t", "s", "c-0", i, at + max(_latencies(rng), 0.0), sent_at=at)
    path = run.write()
    tables = run_jobs(spark, load_run(spark, str(path)), only=("latency",)).tables

    def expected(table: str, at: str) -> dict[Any, tuple[Any, ...]]:
        rows = spark.read.parquet(str(path / table)).where(F.col(at).isNotNull())
        us = F.floor((F.col(at) - F.col("intended_ns")) / 1000)
        rows = rows.select(
            F.floor((F.col(at) - F.lit(T0_NS)) / 1e9).alias("second"), us.alias("us")
        )
        exact = F.percentile(F.col("us"), F.array(*(F.lit(p) for p in PERCENTILES)))
        aggregates = [
            F.count("*").alias("count"),
            (F.sum("us") / F.count("*") / 1000).alias("mean_ms"),
            exact.alias("pcts"),
            (F.max("us") / 1000).alias("max_ms"),
        ]
        summary = {r["second"]: r for r in rows.groupBy("second").agg(*aggregates).collect()}
        summary["all"] = rows.agg(*aggregates).first()
        return {
            key: (r["count"], r["mean_ms"], *(p / 1000 for p in r["pcts"]), r["max_ms"])
            for key, r in summary.items()
        }

    columns = ("count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")
    for kind, table, at in (
        ("publish", "sends", "receipt_ns"),
        ("end_to_end", "receives", "receive_ns"),
    ):
        want = expected(table, at)
        over_time = {
            r["second"]: tuple(r[c] for c in columns)
            for r in tables["latency_over_time"].dicts()
            if r["kind"] == kind
        }
        assert over_time == {k: v for k, v in want.items() if k != "all"}
        by_phase = {
            r["phase"]: tuple(r[c] for c in columns)
            for r in tables["latency_by_phase"].dicts()
            if r["kind"] == kind
        }
        assert by_phase["all"] == want["all"]
        phases = {phase: row[0] for phase, row in by_phase.items() if phase != "all"}
        assert sum(phases.values()) == want["all"][0]
