"""A recorded run's state at any moment, rebuilt from its Parquet traces (docs/dashboard.md).

A run directory (what ``emubroker simulate`` and ``loadgen run`` write) holds the brokers'
load-balancer traces in ``loadbalance/`` (required), their dispatch traces in ``dispatch/`` and
loadgen's per-second table in ``seconds/`` (both optional). :func:`load_run` reads them once;
:meth:`Recording.state_at` answers the page's JSON for a moment of the run:

- **ownership** replays the decision rows in time order: a ``placement`` gives the bundle to its
  destination; a ``shed`` takes it from its owner and gives it to the destination it names (the
  next lookup's ``affinity`` placement confirms it), or to nobody; an ``unload`` leaves it
  unowned; a ``split`` replaces the bundle by its children, owned by the split bundle's owner, or
  by nobody when the split unloaded them. A namespace shows the bundles the run has placed.
- **loads** are each broker's latest ``report`` row at or before the moment;
- **the leader** is the writer of the latest leader's row (shed, split, or a placement the
  placement strategy made), none before the first;
- **topics** come from loadgen's per-second table (messages produced and consumed that second,
  the backlog it saw), each on the owner of its bundle at that moment; a throttled
  subscription's dispatched messages per second and its limit come from the dispatch trace.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from emubroker.dashboard.model import (
    DECISIONS,
    decision_of,
    load_of,
    namespaces_of,
    split_bundle,
)
from emubroker.dashboard.run_files import (
    NS,
    Dispatch,
    RunError,
    dispatch_table,
    load_balancer_rows,
    seconds_table,
)
from emubroker.naming import InvalidNameError, TopicName, topic_hash

if TYPE_CHECKING:
    from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord
    from emubroker.naming import NamespaceBundle

__all__ = ["Recording", "RunError", "load_run"]

HISTORY_SECONDS: Final = 60
"""Seconds of a subscription's dispatch history sent with each state (the page's sparkline)."""


@dataclass
class Recording:
    """A run's traces, ready to answer :meth:`state_at`.

    Attributes:
        name: The run (its directory name).
        start_ns: Wall time of the run's first row.
        end_ns: Wall time of its last row.
        rows: The load-balancer rows, in time order.
        seconds: loadgen's per-second rows by epoch second.
        dispatch: Per ``(topic, subscription)``, the dispatch trace per second.
        partitions: Partitions of each partitioned topic the dispatch trace saw.
    """

    name: str
    start_ns: int
    end_ns: int
    rows: list[LoadBalancerTraceRecord]
    seconds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    dispatch: dict[tuple[str, str], Dispatch] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._times = [row.wall_ns for row in self.rows]
        self.brokers = sorted({row.broker for row in self.rows} | self._destinations())

    def _destinations(self) -> set[str]:
        return {row.dest_broker for row in self.rows if row.dest_broker}

    @property
    def duration(self) -> float:
        """Seconds from the first row to the last."""
        return (self.end_ns - self.start_ns) / NS

    def decisions(self) -> list[LoadBalancerTraceRecord]:
        """Every decision row of the run."""
        return [row for row in self.rows if row.event in DECISIONS]

    def state_at(self, seconds: float) -> dict[str, Any]:
        """The page's state ``seconds`` after the run started (clamped to the run)."""
        at_ns = self.start_ns + round(min(max(seconds, 0.0), self.duration) * NS)
        past = self.rows[: bisect.bisect_right(self._times, at_ns)]
        owners, leader = _replay_decisions(past)
        loads: dict[str, LoadBalancerTraceRecord] = {}
        for row in past:
            if row.event == "report":
                loads[row.broker] = row
        brokers = [
            {
                "id": broker,
                "leader": broker == leader,
                "reachable": True,
                "load": load_of(loads[broker]) if broker in loads else None,
            }
            for broker in self.brokers
        ]
        return {
            "mode": "replay",
            "self": "",
            "cluster": self.name,
            "now_ms": at_ns // 1_000_000,
            "leader": leader,
            "run": {
                "name": self.name,
                "start_ms": self.start_ns // 1_000_000,
                "end_ms": self.end_ns // 1_000_000,
                "t": (at_ns - self.start_ns) / NS,
            },
            "brokers": brokers,
            "namespaces": namespaces_of(owners.items()),
            "topics": self._topics(at_ns // NS, owners),
            # Every decision, with those after the moment too: the page greys them out, so the
            # timeline shows what is coming.
            "decisions": [decision_of(row) for row in self.rows if row.event in DECISIONS],
        }

    def _topics(
        self, second: int, owners: dict[NamespaceBundle, str | None]
    ) -> list[dict[str, Any]]:
        topics: dict[str, dict[str, Any]] = {}
        for row in self.seconds.get(second, []):
            topic = topics.get(row["topic"])
            if topic is None:
                partitions = self.partitions.get(row["topic"], 0)
                topic = topics[row["topic"]] = _topic_entry(row["topic"], owners, partitions)
            if row["role"] == "produce":
                topic["rateIn"] += row["messages"]
                topic["throughputIn"] += row["bytes"]
                continue
            subscription = row["subscription"] or ""
            subs = {sub["name"]: sub for sub in topic["subscriptions"]}
            if subscription not in subs:
                subs[subscription] = self._subscription(row["topic"], subscription, second)
                topic["subscriptions"].append(subs[subscription])
            sub = subs[subscription]
            sub["rateOut"] += row["messages"]
            sub["backlog"] = max(sub["backlog"], row["backlog"] or 0)
            topic["rateOut"] += row["messages"]
            topic["throughputOut"] += row["bytes"]
            topic["backlog"] = max(topic["backlog"], sub["backlog"])
        return [topics[name] for name in sorted(topics)]

    def _subscription(self, topic: str, name: str, second: int) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": name,
            "type": "",
            "consumers": -1,
            "backlog": 0,
            "rateOut": 0.0,
            "throughputOut": 0.0,
            "limit": None,
        }
        dispatch = self.dispatch.get((topic, name))
        if dispatch is None:
            return entry
        end = bisect.bisect_right(dispatch.seconds, second)
        start = bisect.bisect_left(dispatch.seconds, second - HISTORY_SECONDS)
        limit = next((lim for lim in reversed(dispatch.limits[start:end]) if lim), None)
        if limit is not None:
            entry["limit"] = {"msg": limit, "bytes": None, "relative": False}
            entry["history"] = [
                [s * 1000, m]
                for s, m in zip(
                    dispatch.seconds[start:end], dispatch.messages[start:end], strict=True
                )
            ]
        return entry


def _owner_of(topic: TopicName, owners: dict[NamespaceBundle, str | None]) -> str | None:
    hashed = topic_hash(topic)
    for bundle, owner in owners.items():
        if bundle.namespace == topic.namespace and bundle.bundle_range.contains(hashed):
            return owner
    return None


def _topic_entry(
    name: str, owners: dict[NamespaceBundle, str | None], partitions: int
) -> dict[str, Any]:
    try:
        topic = TopicName.parse(name)
    except InvalidNameError:
        topic = None
    brokers: list[str] = []
    if topic is not None:
        # A partitioned topic is served by the owners of its partitions' bundles.
        names = [topic, *(topic.partition(i) for i in range(partitions))] if partitions else [topic]
        for part in names[1:] if partitions else names:
            owner = _owner_of(part, owners)
            if owner is not None and owner not in brokers:
                brokers.append(owner)
    return {
        "name": name,
        "broker": brokers[0] if len(brokers) == 1 else None,
        "brokers": sorted(brokers),
        "rateIn": 0.0,
        "rateOut": 0.0,
        "throughputIn": 0.0,
        "throughputOut": 0.0,
        "backlog": 0,
        "producers": -1,
        "consumers": -1,
        "subscriptions": [],
    }


def _replay_decisions(
    rows: list[LoadBalancerTraceRecord],
) -> tuple[dict[NamespaceBundle, str | None], str | None]:
    """Owners of the bundles and the leader after ``rows`` (the module docstring's rules)."""
    owners: dict[NamespaceBundle, str | None] = {}
    leader: str | None = None
    for row in rows:
        bundle = split_bundle(row.bundle)
        if row.event in ("shed", "split") or (
            row.event == "placement" and row.reason == "strategy"
        ):
            leader = row.broker
        if bundle is None:
            continue
        moved = row.event == "shed" and row.label in ("", "Success")  # not a TransferShedder skip
        if row.event == "placement" or moved:
            owners[bundle] = row.dest_broker or None
        elif row.event == "unload":
            owners[bundle] = None
        elif row.event == "split":
            owner = owners.pop(bundle, row.source_broker or None)
            for child in filter(None, (split_bundle(c) for c in row.split_children.split(","))):
                owners[child] = None if row.split_unload else owner
    return owners, leader


def load_run(run_dir: str | Path) -> Recording:
    """Read a run directory's traces.

    Raises:
        RunError: No such directory, no load-balancer trace, a trace of an unknown schema
            version, or an unreadable file.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise RunError(f"{root}: no such run directory")
    rows = load_balancer_rows(root / "loadbalance")
    seconds = seconds_table(root / "seconds")
    dispatch, partitions = dispatch_table(root / "dispatch")
    times = [row.wall_ns for row in rows] + [s * NS for s in seconds]
    return Recording(
        name=root.resolve().name,
        start_ns=min(times),
        end_ns=max(times),
        rows=rows,
        seconds=seconds,
        dispatch=dispatch,
        partitions=partitions,
    )
