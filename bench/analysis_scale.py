"""`loadgen analyze` over generated runs of 1M, 3M and 10M delivery rows: time and growth.

Usage: python bench/analysis_scale.py [--rows 1000000,3000000,10000000] [--master local[2]]
                                      [--keep DIR] [--compare CHECKOUT]

Writes a run directory per size as `loadgen run` would (docs/loadgen-trace.md): a manifest,
`sends` and `receives` with one row per message each (so N delivery rows and N send rows), a
`seconds`-free layout, and an `events` table with two unloads. The messages are 4 partitions
of one topic at 20,000 msg/s, read by a Shared subscription of 4 consumers, with exponential
latencies; a 0.01 % of them are left undelivered and as many delivered twice, so that every
analysis has work to do. Then `python -m loadgen analyze RUN --out REPORT --master MASTER` runs
in a fresh process per size, and the wall time of the whole command (JVM start included) is
printed, with the growth against the smallest size and the load average around it (the
machine may be shared). Goal: 10M rows in under 2 minutes on local[2].

With `--compare CHECKOUT` (another version of this repository, e.g. `git worktree add` of
main), each size is also analysed by that version's `loadgen`, right before this one, and the
ratio of the two times is printed: side by side, as the load of a shared machine drifts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emubroker.traceschema.loadgen import arrow_schema  # noqa: E402
from loadgen.trace.writer import DEFAULT_ROW_GROUP_ROWS  # noqa: E402

T0_NS = 1_800_000_000 * 1_000_000_000
RATE = 20_000
PARTITIONS = 4
CONSUMERS = 4
CHUNK = 1_000_000
TOPIC = "persistent://public/default/scale"


def _strings(values: list[str], index: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(index.astype(np.int32)), pa.array(values)).cast(
        pa.string()
    )


def write_run(path: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for table in ("sends", "receives", "events"):
        (path / table).mkdir(parents=True, exist_ok=True)
    topics = [f"{TOPIC}-partition-{p}" for p in range(PARTITIONS)]
    consumers = [f"readers-{c}" for c in range(CONSUMERS)]
    sends_schema, receives_schema = arrow_schema("sends"), arrow_schema("receives")
    with (
        pq.ParquetWriter(
            path / "sends" / "w0-00001.parquet", sends_schema, compression="zstd"
        ) as sends,
        pq.ParquetWriter(
            path / "receives" / "w0-00001.parquet", receives_schema, compression="zstd"
        ) as receives,
    ):
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            index = np.arange(start, start + n, dtype=np.int64)
            partition = index % PARTITIONS
            sequence = index // PARTITIONS
            intended = T0_NS + index * (1_000_000_000 // RATE)
            receipt = intended + rng.exponential(2e6, n).astype(np.int64) + 200_000
            received = receipt + rng.exponential(1e6, n).astype(np.int64) + 100_000
            key_index = rng.integers(0, 1000, n)
            keys = pa.array([f"k-{k}" for k in key_index])
            common = {
                "run_id": pa.array(["scale"] * n),
                "worker": pa.array(np.zeros(n, dtype=np.int64)),
                "topic": _strings(topics, partition),
                "partition": pa.array(partition),
                "producer": _strings([f"writers-{p}-scale" for p in range(PARTITIONS)], partition),
                "producer_index": pa.array(partition),
                "sequence_id": pa.array(sequence),
                "key": keys,
                "size": pa.array(np.full(n, 256, dtype=np.int64)),
                "intended_ns": pa.array(intended),
                "send_ns": pa.array(intended),
                "ledger_id": pa.array(np.ones(n, dtype=np.int64)),
                "entry_id": pa.array(sequence),
                "batch_index": pa.array(np.full(n, -1, dtype=np.int64)),
                "broker": pa.array(["pulsar://127.0.0.1:6650"] * n),
            }
            sends.write_table(
                pa.table(
                    {**common, "receipt_ns": pa.array(receipt), "error": pa.nulls(n, pa.string())},
                    schema=sends_schema,
                ),
                row_group_size=DEFAULT_ROW_GROUP_ROWS,
            )
            delivered = rng.random(n) >= 0.0001  # a few lost ...
            twice = rng.random(n) < 0.0001  # ... and a few duplicated
            take = np.concatenate([np.flatnonzero(delivered), np.flatnonzero(twice & delivered)])
            consumer = rng.integers(0, CONSUMERS, len(take))
            part = {k: v.take(pa.array(take)) for k, v in common.items()}
            receives.write_table(
                pa.table(
                    {
                        **part,
                        "subscription": pa.array(["shared"] * len(take)),
                        "consumer": _strings(consumers, consumer),
                        "receive_ns": pa.array(received[take]),
                        "redelivery_count": pa.array(np.zeros(len(take), dtype=np.int64)),
                    },
                    schema=receives_schema,
                ),
                row_group_size=DEFAULT_ROW_GROUP_ROWS,
            )
    seconds = rows / RATE
    events = [
        {
            "run_id": "scale",
            "index": i,
            "at_s": at,
            "action": "UnloadTopic",
            "target": "scale",
            "params": json.dumps({"action": "unload_topic", "topic": "scale"}),
            "fired_ns": T0_NS + int(at * 1e9),
            "finished_ns": T0_NS + int(at * 1e9) + 5_000_000,
            "outcome": "ok",
            "detail": "unloaded 4 topic(s)",
        }
        for i, at in enumerate((seconds / 3, 2 * seconds / 3))
    ]
    pq.write_table(
        pa.Table.from_pylist(events, schema=arrow_schema("events")),
        path / "events" / "runner-00001.parquet",
    )
    manifest = {
        "schema_version": 1,
        "run_id": f"scale-{rows}",
        "scenario": {
            "name": "scale",
            "description": f"{rows:,} generated deliveries",
            "producers": [
                {"name": "writers", "topic": "scale", "count": 1, "rate": RATE, "size": 256}
            ],
            "consumers": [
                {
                    "name": "readers",
                    "topic": "scale",
                    "subscription": "shared",
                    "type": "Shared",
                    "count": CONSUMERS,
                }
            ],
            "phases": [{"name": "steady", "duration": seconds}],
        },
        "start_ns": T0_NS,
        "end_ns": T0_NS + int((seconds + 1) * 1e9),
        "trace_sample": 1.0,
        "client": "native",
        "cluster": {"brokers": [], "started_by_loadgen": False, "storage": None},
    }
    (path / "manifest.json").write_text(json.dumps(manifest))


def analyse(run: Path, report: Path, master: str, checkout: Path) -> float:
    """Seconds `python -m loadgen analyze` of `checkout` takes on `run` (a fresh process)."""
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "loadgen",
            "analyze",
            str(run),
            "--out",
            str(report),
            "--master",
            master,
            "--quiet",
        ],
        check=True,
        cwd=checkout,  # `-m` imports loadgen from the working directory first
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1000000,3000000,10000000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", help="keep the generated runs and reports here")
    parser.add_argument("--compare", type=Path, help="a checkout to measure side by side")
    args = parser.parse_args()
    sizes = [int(s) for s in args.rows.split(",")]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="analysis-scale-"))
    results = []
    try:
        for rows in sizes:
            run = base / f"run-{rows}"
            started = time.perf_counter()
            if not (run / "manifest.json").exists():
                write_run(run, rows)
            generated = time.perf_counter() - started
            line = f"{rows:>12,} delivery rows (generated in {generated:5.1f} s):"
            if args.compare:
                before = load()
                other = analyse(run, base / f"report-{rows}-compared", args.master, args.compare)
                line += f" compared version {other:6.1f} s (load {before}),"
            before = load()
            elapsed = analyse(run, base / f"report-{rows}", args.master, ROOT)
            results.append((rows, elapsed))
            line += (
                f" analysed in {elapsed:6.1f} s ({rows / elapsed / 1e3:,.0f} k rows/s,"
                f" load {before} -> {load()})"
            )
            if args.compare:
                line += f", {elapsed / other:.2f}x the compared version's time"
            print(line, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    first_rows, first_time = results[0]
    for rows, elapsed in results:
        print(f"{rows / first_rows:5.1f}x rows -> {elapsed / first_time:5.2f}x time")


if __name__ == "__main__":
    main()
