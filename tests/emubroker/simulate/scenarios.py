"""Small simulation scenarios for the tests: seconds of wall time, decisions guaranteed.

Broker 0 (the leader) is the weak machine: its model usage counts its core busy at 100 msg/s,
the others' at 1,000, so the same traffic loads it ten times as much and the ThresholdShedder
unloads its bundles. Every bundle carries one topic at its own rate, so the shedder's choice
(largest first) cannot hinge on measurement noise.
"""

from __future__ import annotations

BROKER_CONFIG = """
defaultNumberOfNamespaceBundles = 9
emubrokerModelMsgRatePerCore = 1000
emubrokerAvailableProcessors = 1
loadBalancerLoadSheddingStrategy = "{impl}ThresholdShedder"
loadBalancerLoadPlacementStrategy = "{impl}LeastResourceUsageWithWeight"
loadBalancerAverageResourceUsageDifferenceThresholdPercentage = {margin}
loadBalancerBrokerThresholdShedderPercentage = {threshold}
loadBalancerBundleUnloadMinThroughputThreshold = 0.0001
loadBalancerHistoryResourcePercentage = 0.1
loadBalancerSheddingIntervalMinutes = {shed}
loadBalancerSheddingGracePeriodMinutes = {grace}
loadBalancerHostUsageCheckIntervalMinutes = {usage}
loadBalancerReportUpdateMinIntervalMillis = {report_ms}
loadBalancerReportUpdateMaxIntervalMinutes = {report_max}
statsUpdateFrequencyInSecs = {stats_seconds}
"""

TOPICS = (
    "topic-22",
    "topic-1",
    "topic-0",
    "topic-33",
    "topic-23",
    "topic-2",
    "topic-6",
    "topic-3",
    "topic-24",
)
"""One topic in each of the namespace's nine bundles, in bundle order (found by their hashes)."""

RATES = [2, 3, 4, 5, 6, 7, 8, 9, 10]
"""Msg/s of each topic: every bundle's throughput differs from every other's."""


def traffic(rates: list[int]) -> str:
    """A producer ``p<i>`` and a consumer ``c<i>`` on ``TOPICS[i]``, at ``rates[i]`` msg/s."""
    groups = []
    for index, (topic, rate) in enumerate(zip(TOPICS, rates, strict=True)):
        groups.append(
            f'[[topics]]\nname = "{topic}"\n'
            f'[[producers]]\nname = "p{index}"\ntopic = "{topic}"\nrate = {rate}\nsize = 200\n'
            f'[[consumers]]\nname = "c{index}"\ntopic = "{topic}"\nsubscription = "s"\n'
        )
    return "\n".join(groups)


def shedding_scenario(
    *,
    seconds: float,
    shed_minutes: float,
    seed: int = 5,
    threshold: int = 10,
    margin: int = 1,
    broker_2_rate: int = 1000,
    stats_seconds: int = 1,
    report_max_minutes: float | None = None,
) -> str:
    """Three brokers, nine bundles of one topic each, shedding every ``shed_minutes``.

    ``threshold`` is ``loadBalancerBrokerThresholdShedderPercentage``: a broker more than that
    many points above the average sheds.

    Placement spreads the bundles evenly, three per broker, then by resource usage among the
    brokers ``margin`` points (``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``)
    below the average: a bundle shed from broker 0 never goes back to it. ``broker_2_rate`` is
    broker 2's model msg/s per core: below the others' 1,000 it is loaded more than broker 1.

    ``stats_seconds`` is ``statsUpdateFrequencyInSecs``, the window the bundles' rates are
    measured over; ``report_max_minutes`` is ``loadBalancerReportUpdateMaxIntervalMinutes``
    (default: ``shed_minutes``), how long a broker may go without rewriting its report.
    """
    config = BROKER_CONFIG.format(
        impl="org.apache.pulsar.broker.loadbalance.impl.",
        shed=shed_minutes,
        threshold=threshold,
        margin=margin,
        grace=shed_minutes * 1.5,
        usage=1 / 60,
        report_ms=400,
        report_max=shed_minutes if report_max_minutes is None else report_max_minutes,
        stats_seconds=stats_seconds,
    )
    return (
        f'name = "test-shedding"\nseed = {seed}\n'
        "[cluster.start]\nbrokers = 3\n[cluster.start.config]\n"
        + config
        + "\n[simulate]\nepoch = 1_700_000_000\n"
        + "[simulate.brokers.0]\nconfig = { emubrokerModelMsgRatePerCore = 100 }\n"
        + f"[simulate.brokers.2]\nconfig = {{ emubrokerModelMsgRatePerCore = {broker_2_rate} }}\n"
        + traffic(RATES)
        + f'\n[[phases]]\nname = "run"\nduration = "{seconds:g}s"\n'
    )


FAILOVER_EVENTS = (10, 28, 32)
"""When :func:`failover_scenario` kills broker 1, restarts it, and unloads a bundle to it."""


def failover_scenario(*, seed: int = 7) -> str:
    """Two brokers; broker 1 (an owner, not the leader) is killed, restarted, then given a bundle.

    Every owner after each event is decided by the events alone, whatever the first placement:
    after the kill every bundle is broker 0's (the only one left; shedding is off), the restart
    moves nothing, and the unload names its destination. The margins: broker 1's session times
    out 3 s after the kill, and its clients' reconnect backoff (0.1 s doubling) reaches the new
    owner at the attempt after that, 13.1 s or 16.3 s (23 s seen at worst under load), 5 s and
    more before the restart (a lookup that reaches the dead broker, which the service URL names,
    tries the live one 0.1 s later instead of failing the attempt); the unloaded bundle's
    clients reconnect at once and have 8 s; its destination is the broker that carries nothing,
    which the placement strategy would pick as well. Stub faults on the way (a stall, two
    failed writes) must not lose anything.
    """
    kill, restart, unload = FAILOVER_EVENTS
    return (
        f'name = "test-failover"\nseed = {seed}\n'
        '[cluster.start]\nbrokers = 2\nstorage = "stub"\n[cluster.start.config]\n'
        "defaultNumberOfNamespaceBundles = 9\n"
        "metadataStoreSessionTimeoutMillis = 3000\n"
        "loadBalancerSheddingEnabled = false\n"
        "loadBalancerAutoBundleSplitEnabled = false\n"
        + "\n[simulate]\nepoch = 1_700_000_000\n"
        + traffic(RATES)
        + '\n[[phases]]\nname = "run"\nduration = "40s"\n'
        + f'[[events]]\naction = "kill_broker"\nat = {kill}\nbroker = 1\n'
        + f'[[events]]\naction = "restart_broker"\nat = {restart}\nbroker = 1\n'
        + '[[events]]\naction = "stub_stall"\nat = 30\nseconds = 0.5\n'
        + '[[events]]\naction = "stub_fail_next"\nat = 31\ncount = 2\nops = ["add"]\n'
        + f'[[events]]\naction = "unload_bundle"\nat = {unload}\nnamespace = "public/default"\n'
        + 'bundle = "0x00000000_0x1c71c71c"\ndestination_broker = "127.0.0.1:8081"\n'
    )


EVERY_EVENT = """
[[events]]
action = "set_dynamic_config"
at = 2
key = "dispatchThrottlingRateInMsg"
value = "100000"
[[events]]
action = "set_dispatch_rate"
at = 3
scope = "namespace"
target = "public/default"
msg_rate = 100000
[[events]]
action = "set_dispatch_rate"
at = 3
scope = "subscription"
target = "topic-1"
subscription = "s"
msg_rate = 100000
[[events]]
action = "stub_faults"
at = 4
config = { seed = 1, ops = { add = { latency = { type = "fixed", ms = 5 } } } }
[[events]]
action = "stub_clear"
at = 5
[[events]]
action = "unload_topic"
at = 6
topic = "topic-0"
[[events]]
action = "unload_namespace"
at = 7
namespace = "public/default"
[[events]]
action = "split_bundle"
at = 9
namespace = "public/default"
bundle = "0x00000000_0x1c71c71c"
unload = true
[[events]]
action = "kill_broker"
at = 11
broker = 1
signal = "TERM"
[[events]]
action = "restart_broker"
at = 14
broker = 1
[[events]]
action = "unload_bundle"
at = 16
namespace = "public/default"
bundle = "0x00000000_0x1c71c71c"
"""
"""One of every event but pauses, on :func:`failover_scenario`'s cluster; the last is refused
(the bundle was split at 9 s: it is no longer one of the namespace's)."""


def every_event_scenario() -> str:
    """Two brokers for 20 s, and :data:`EVERY_EVENT`."""
    head, _, _ = failover_scenario().partition("[[events]]")
    return head.replace('duration = "40s"', 'duration = "20s"') + EVERY_EVENT


def leader_kill_scenario() -> str:
    """:func:`failover_scenario`'s cluster for 30 s; the leader, broker 0, killed at 5 s (and
    again at 6 s, which is an error: it is down), restarted at 15 s; every bundle unloaded at
    20 s."""
    head, _, _ = failover_scenario().partition("[[events]]")
    events = "".join(
        f"[[events]]\naction = {action!r}\nat = {at}\n{rest}\n"
        for action, at, rest in (
            ("kill_broker", 5, "broker = 0"),
            ("kill_broker", 6, "broker = 0"),
            ("restart_broker", 15, "broker = 0"),
            ("unload_namespace", 20, "namespace = 'public/default'"),
        )
    )
    return head.replace('duration = "40s"', 'duration = "30s"') + events
