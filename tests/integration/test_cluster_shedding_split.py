"""The leader's shedding and automatic split moving real bundles on ``emubroker cluster -n 3``.

Real processes, the model usage source (a broker's CPU is its own message rate against
``emubrokerModelMsgRatePerCore``) and fractional intervals. The official client produces and
consumes throughout; every message acknowledged to a producer is received.

- Four bundles of one namespace are placed on one broker (an unload naming a
  ``destinationBroker`` sets the leader's affinity), each carrying one topic at the same rate:
  that broker reads 90 % CPU, the others 0 %. Each strategy then moves bundles, through the
  owner's admin API, as its rules predict: the default ThresholdShedder until every broker is
  within the threshold of the average; OverloadShedder one bundle (the skewed broker is then
  under the overload threshold); UniformLoadShedder until the message rates are two bundles to
  one; AvgShedder two bundles at once, both to the broker it names; TransferShedder (extensible
  load manager) until the loads' standard deviation is under its target.
- A bundle holding more topics than ``loadBalancerNamespaceBundleMaxTopics`` is split by the
  leader at its owner; the new ranges are listed by ``GET .../bundles`` and the clients follow
  their topics to the children.

The assertions are on decisions and outcomes, polled with deadlines, never on timings.
"""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar
import pytest

from emubroker.naming import BundleRange, name_hash
from tests.integration.conftest import make_client
from tests.integration.test_cluster import wait_for_leader
from tests.integration.test_cluster_leader_tasks import metrics
from tests.integration.test_cluster_load_reports import reports, wait_for
from tests.support.cluster import ROOT, _env, cluster_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration

IMPL = "org.apache.pulsar.broker.loadbalance.impl"

RATE = 40.0  # messages per second per topic (and as many delivered)
PER_CORE = 4 * 2 * RATE / 0.9  # four topics in and out keep one core 90 % busy
THRESHOLD = 20  # loadBalancerBrokerThresholdShedderPercentage
CONF = f"""\
loadBalancerReportUpdateMinIntervalMillis=200
loadBalancerHostUsageCheckIntervalMinutes=0.005
statsUpdateFrequencyInSecs=1
loadBalancerResourceQuotaUpdateIntervalMinutes=0.05
loadBalancerSheddingIntervalMinutes=0.05
loadBalancerSheddingGracePeriodMinutes=0.1
loadBalancerBrokerThresholdShedderPercentage={THRESHOLD}
loadBalancerBundleUnloadMinThroughputThreshold=0
loadBalancerHistoryResourcePercentage=0.5
loadBalancerNamespaceBundleMaxTopics=4
loadBalanceSheddingDelayInSeconds=0
emubrokerResourceUsageSource=model
emubrokerAvailableProcessors=1
emubrokerModelMsgRatePerCore={PER_CORE}
"""


class Flow(threading.Thread):
    """One topic: a producer at ``RATE`` msg/s and a consumer; what was acknowledged and read."""

    def __init__(self, service_url: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.client = make_client(service_url)
        try:
            self.consumer = self.client.subscribe(
                topic, "flow", consumer_type=pulsar.ConsumerType.Shared
            )
            self.producer = self.client.create_producer(topic, batching_enabled=False)
        except Exception:
            self.client.close()
            raise
        self.stopping = threading.Event()
        self.acknowledged: set[bytes] = set()
        self.received: set[bytes] = set()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def run(self) -> None:
        self._reader.start()
        sequence = 0
        while not self.stopping.is_set():
            payload = b"m%d" % sequence
            sequence += 1
            self.producer.send_async(payload, self._sent(payload))
            time.sleep(1 / RATE)  # pacing of the load, not a wait for behaviour
        self.producer.flush()

    def _sent(self, payload: bytes) -> Any:
        def callback(result: pulsar.Result, _msg_id: pulsar.MessageId) -> None:
            with self._lock:
                if result == pulsar.Result.Ok:
                    self.acknowledged.add(payload)
                else:
                    self.errors.append(str(result))

        return callback

    def _read(self) -> None:
        while True:
            try:
                message = self.consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                if self.stopping.is_set() and self.all_read():
                    return
                continue
            except pulsar.AlreadyClosed:
                return
            with self._lock:
                self.received.add(message.data())
            self.consumer.acknowledge(message)

    def all_read(self) -> bool:
        with self._lock:
            return self.acknowledged <= self.received

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)

    def close(self) -> None:
        self.client.close()


def open_flow(service_url: str, topic: str) -> Flow:
    """A flow on ``topic``, once the broker knows the namespace (just created elsewhere)."""

    def attempt() -> Flow | None:
        try:
            return Flow(service_url, topic)
        except pulsar.TopicNotFound:
            return None

    found: Flow = wait_for(attempt, 30, f"{topic} never became available")
    return found


def topic_in(namespace: str, bundle: BundleRange, prefix: str) -> str:
    """The first ``persistent://namespace/<prefix>-<n>`` whose hash falls in ``bundle``."""
    for n in range(100_000):
        topic = f"persistent://{namespace}/{prefix}-{n}"
        if bundle.contains(name_hash(topic)):
            return topic
    raise AssertionError(f"no topic hashes into {bundle}")


def owner_of(admin_url: str, topic: str, *, within: float = 10.0) -> str:
    """The topic's owner, as an HTTP lookup answers it.

    While the leader sheds the topic's bundle, its lookups answer "being unloaded" for that
    moment; as a client would, this asks again until the bundle has an owner (``within`` s).
    """
    deadline = time.monotonic() + within
    while True:
        status, body = rest_call(admin_url, "GET", "/lookup/v2/topic/" + topic.replace("://", "/"))
        unloading = status == 500 and "is being unloaded" in str(body)
        if not unloading or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200, body
    return str(body["brokerUrl"])


def bundles_of(admin_url: str, namespace: str) -> list[str]:
    status, body = rest_call(admin_url, "GET", f"/admin/v2/namespaces/{namespace}/bundles")
    assert status == 200, body
    return list(body["boundaries"])


@dataclass
class SkewedRun:
    """A cluster whose four ``public/skew`` bundles all started on ``skewed``, under traffic."""

    brokers: list[dict[str, Any]]
    leader: dict[str, Any]
    skewed: dict[str, Any]
    topics: list[str]
    flows: list[Flow]
    metadata_url: str

    def owners(self) -> list[str]:
        """Each topic's owner (broker id), as the leader's lookup answers."""
        ids = {b["service_url"]: b["broker_id"] for b in self.brokers}
        return [ids[owner_of(self.leader["admin_url"], t)] for t in self.topics]

    def loads(self) -> dict[str, float] | None:
        """The brokers' model loads (percent of a core) once their reports carry the traffic."""
        current = reports(self.metadata_url)
        rates = {b: r.msg_rate_in + r.msg_rate_out for b, r in current.items()}
        if sum(rates.values()) < 0.75 * 2 * RATE * len(self.topics):
            return None
        return {b: 100 * rate / PER_CORE for b, rate in rates.items()}

    def counter(self, name: str) -> float:
        """The leader's ``name`` gauge (summed over its samples); 0 before it appears."""
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics(self.leader["admin_url"]).splitlines()
            if line.startswith(name + "{")
        )

    def start(self, flows: list[Flow]) -> None:
        self.flows += flows
        for flow in flows:
            flow.start()


@contextmanager
def skewed_run(tmp_path: Path, extra: str = "") -> Iterator[SkewedRun]:
    """Start the cluster, skew the four bundles onto broker 1 and run their traffic.

    On exit, every message acknowledged to a producer must have been received.
    """
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF + extra)
    with cluster_process(tmp_path / "run", "--config", str(conf)) as cluster:
        brokers = cluster.ready["brokers"]
        leader_id = wait_for_leader(brokers[0])
        [leader] = [b for b in brokers if b["broker_id"] == leader_id]
        skewed = brokers[1]
        namespace = "public/skew"
        status, body = rest_call(
            leader["admin_url"], "PUT", f"/admin/v2/namespaces/{namespace}",
            {"bundles": {"numBundles": 4}},
        )  # fmt: skip
        assert status == 204, body
        boundaries = [int(b, 16) for b in bundles_of(leader["admin_url"], namespace)]
        ranges = [BundleRange(a, b) for a, b in itertools.pairwise(boundaries)]
        topics = [topic_in(namespace, r, "skew") for r in ranges]
        for bundle_range in ranges:
            status, body = rest_call(
                leader["admin_url"], "PUT",
                f"/admin/v2/namespaces/{namespace}/{bundle_range.name}/unload"
                f"?destinationBroker={skewed['broker_id']}",
            )  # fmt: skip
            assert status == 204, body
        run = SkewedRun(brokers, leader, skewed, topics, [], cluster.ready["metadata_url"])
        # The first lookup places each bundle on the skewed broker.
        assert run.owners() == [skewed["broker_id"]] * len(topics)
        run.start([open_flow(brokers[0]["service_url"], topic) for topic in topics])
        try:
            yield run
        finally:
            for flow in run.flows:
                flow.stop()
        try:
            for flow in run.flows:
                wait_for(flow.all_read, 60, f"messages lost on {flow.producer.topic()}")
                assert flow.errors == [], flow.errors
                assert flow.acknowledged, flow.producer.topic()
        finally:
            for flow in run.flows:
                flow.close()


def wait_until(condition: Any, what: str, timeout: float = 80) -> Any:
    return wait_for(condition, timeout, what)


def test_threshold_shedder_spreads_a_skewed_broker_and_a_hot_bundle_is_split(
    tmp_path: Path,
) -> None:
    with skewed_run(tmp_path) as run:
        # Moved (by the owner, at the leader's request) until within the threshold: whatever
        # the placement, no broker is left with more than two of the four bundles.
        def spread() -> dict[str, float] | None:
            loads = run.loads()
            if loads is None:
                return None
            average = sum(loads.values()) / len(loads)
            return loads if all(x <= average + THRESHOLD for x in loads.values()) else None

        loads = wait_until(spread, "the brokers never came within the threshold")
        assert loads[run.skewed["broker_id"]] < 100
        assert max(Counter(run.owners()).values()) <= 2
        assert run.counter("pulsar_lb_unload_bundle_total") >= 2

        # Split: five topics in one bundle of a one-bundle namespace (the limit is four).
        hot = "public/hot"
        status, body = rest_call(
            run.leader["admin_url"], "PUT", f"/admin/v2/namespaces/{hot}",
            {"bundles": {"numBundles": 1}},
        )  # fmt: skip
        assert status == 204, body
        run.start(
            [
                open_flow(run.brokers[2]["service_url"], f"persistent://{hot}/t-{i}")
                for i in range(5)
            ]
        )
        split = wait_until(
            lambda: (
                len(bundles_of(run.leader["admin_url"], hot)) > 2
                and bundles_of(run.leader["admin_url"], hot)
            ),
            "the hot bundle was never split",
        )
        assert (split[0], split[-1]) == ("0x00000000", "0xffffffff")
        # Counted once the owner answered (after unloading the children the layout shows).
        wait_until(
            lambda: run.counter("pulsar_lb_bundles_split_total") >= 1,
            "the leader never counted the split",
        )


def test_overload_shedder_moves_one_bundle_off_the_overloaded_broker(tmp_path: Path) -> None:
    # 90 % >= 85 %: at least (0.90 - 0.85 + 0.05) of its traffic goes, the largest bundle
    # first: one bundle of four, and at 67.5 % the broker is no longer overloaded.
    extra = f"loadBalancerLoadSheddingStrategy={IMPL}.OverloadShedder\n"
    with skewed_run(tmp_path, extra) as run:
        owners = wait_until(
            lambda: (owners := run.owners()).count(run.skewed["broker_id"]) < 4 and owners,
            "OverloadShedder never moved a bundle",
        )
        assert owners.count(run.skewed["broker_id"]) == 3
        wait_until(lambda: run.loads(), "the reports never caught up with the move")
        assert run.owners().count(run.skewed["broker_id"]) == 3
        assert run.counter("pulsar_lb_unload_bundle_total") == 1


def test_uniform_load_shedder_evens_out_the_message_rates(tmp_path: Path) -> None:
    # Each cycle the busiest broker gives up bundles worth up to 60 % of the rate difference
    # with the idlest one; two bundles to one is where that no longer fits a bundle.
    extra = (
        f"loadBalancerLoadSheddingStrategy={IMPL}.UniformLoadShedder\n"
        "maxUnloadPercentage=0.6\nminUnloadMessage=10\n"
    )
    with skewed_run(tmp_path, extra) as run:
        counts = wait_until(
            lambda: sorted(Counter(run.owners()).values()) == [1, 1, 2] and run.loads(),
            "UniformLoadShedder never evened out the rates",
        )
        assert counts
        assert run.counter("pulsar_lb_unload_bundle_total") >= 2


def test_avg_shedder_moves_two_bundles_to_the_broker_it_names(tmp_path: Path) -> None:
    # The busiest broker pairs with an idle one (a 90-point gap, over the high mark twice):
    # its bundles worth up to 60 % of the rate difference go, several in one cycle, all bound
    # to that idle broker, which the unloads name (the leader's affinity places them there).
    # The next move needs two more cycles of hits, long after these are seen.
    extra = (
        f"loadBalancerLoadSheddingStrategy={IMPL}.AvgShedder\n"
        f"loadBalancerLoadPlacementStrategy={IMPL}.AvgShedder\n"
        "maxUnloadPercentage=0.6\nminUnloadMessage=10\n"
    )
    with skewed_run(tmp_path, extra) as run:
        owners = wait_until(
            lambda: (owners := run.owners()).count(run.skewed["broker_id"]) <= 2 and owners,
            "AvgShedder never moved its bundles",
        )
        moved = [o for o in owners if o != run.skewed["broker_id"]]
        assert len(set(moved)) == 1, owners


def test_transfer_shedder_transfers_until_the_loads_are_even_enough(tmp_path: Path) -> None:
    # TransferShedder moves load from the busiest to the least loaded broker (named in each
    # transfer) while the loads' standard deviation exceeds loadBalancerBrokerLoadTargetStd.
    extra = (
        "loadManagerClassName=org.apache.pulsar.broker.loadbalance.extensions."
        "ExtensibleLoadManagerImpl\n"
        "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.extensions."
        "scheduler.TransferShedder\n"
    )
    with skewed_run(tmp_path, extra) as run:

        def even() -> dict[str, float] | None:
            loads = run.loads()
            spread = None if loads is None else statistics.pstdev(x / 100 for x in loads.values())
            return loads if spread is not None and spread <= 0.25 else None

        wait_until(even, "TransferShedder never brought the loads under the target deviation")
        assert run.owners().count(run.skewed["broker_id"]) < 4
        assert run.counter("pulsar_lb_unload_bundle_total") >= 1


@pytest.mark.parametrize(
    ("command", "key", "value"),
    [
        ("standalone", "loadBalancerLoadSheddingStrategy", f"{IMPL}.Bogus"),
        ("cluster", "defaultNamespaceBundleSplitAlgorithm", "halves"),
        ("cluster", "loadManagerClassName", f"{IMPL}.SimpleLoadManagerImpl"),
    ],
)
def test_an_unknown_strategy_or_algorithm_stops_start_up_naming_the_key(
    tmp_path: Path, command: str, key: str, value: str
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"{key}={value}\n")
    args = ["--config", str(conf), "--port", "0"]
    if command == "cluster":
        args += ["--run-dir", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-m", "emubroker", command, *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"invalid configuration: {conf}: {key} = '{value}': expected one of " in done.stderr
