"""Broker memory over a long produce->consume run: consumed ledgers trimmed, against retention.

Usage: python bench/memory.py [--messages N] [--size B] [--rounds R]

Starts ``emubroker standalone`` (in memory, default ``broker.conf``: ledgers roll over every
50,000 entries) and, with ``protocol.client`` (unbatched, so every message is an entry), produces
N messages while a consumer receives and acknowledges each one, on a topic of ``public/default``
and then on one of a namespace with infinite retention, which keeps every ledger. It prints how
much the broker's resident memory grew during each run and its CPU per message: with the
consumed ledgers deleted the growth stays near one ledger's worth whatever N is, with retention
it grows with N. The retained run is the baseline measured in the same broker, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from throughput import bench_protocol, broker_process, new_topic

RETAINED_NAMESPACE = "public/retained"


def admin_call(admin: str, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{admin}/admin/v2/{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with broker_process() as (url, admin, broker):
        admin_call(admin, "PUT", f"namespaces/{RETAINED_NAMESPACE}")
        admin_call(
            admin,
            "POST",
            f"namespaces/{RETAINED_NAMESPACE}/retention",
            {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
        )
        bench_protocol(url, new_topic(), 2_000, args.size, False)  # warm up the broker
        print(f"{args.messages} unbatched messages of {args.size} B, produce -> consume + ack")
        print(f"{'namespace':<20} {'RSS growth MiB':>15} {'broker us/msg':>14} {'msg/s':>9}")
        for _ in range(args.rounds):
            # Trimmed first: memory it frees could otherwise be reused by the retained run.
            for namespace in ("public/default", RETAINED_NAMESPACE):
                topic = f"persistent://{namespace}/{new_topic()}"
                rss = broker.memory_info().rss
                cpu = broker.cpu_times()
                rate, _ = bench_protocol(url, topic, args.messages, args.size, False)
                grown = (broker.memory_info().rss - rss) / 2**20
                after = broker.cpu_times()
                spent = after.user + after.system - cpu.user - cpu.system
                us = spent / args.messages * 1e6
                print(f"{namespace:<20} {grown:>15.1f} {us:>14.1f} {rate:>9.0f}")


if __name__ == "__main__":
    main()
