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
loadBalancerAverageResourceUsageDifferenceThresholdPercentage = 1
loadBalancerBrokerThresholdShedderPercentage = {threshold}
loadBalancerBundleUnloadMinThroughputThreshold = 0.0001
loadBalancerHistoryResourcePercentage = 0.1
loadBalancerSheddingIntervalMinutes = {shed}
loadBalancerSheddingGracePeriodMinutes = {grace}
loadBalancerHostUsageCheckIntervalMinutes = {usage}
loadBalancerReportUpdateMinIntervalMillis = {report_ms}
loadBalancerReportUpdateMaxIntervalMinutes = {report_max}
statsUpdateFrequencyInSecs = 1
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
    *, seconds: float, shed_minutes: float, seed: int = 5, threshold: int = 10
) -> str:
    """Three brokers, nine bundles of one topic each, shedding every ``shed_minutes``.

    ``threshold`` is ``loadBalancerBrokerThresholdShedderPercentage``: a broker more than that
    many points above the average sheds.

    Placement spreads the bundles evenly, three per broker, then by resource usage among the
    brokers 1 point below the average: a bundle shed from broker 0 never goes back to it.
    """
    config = BROKER_CONFIG.format(
        impl="org.apache.pulsar.broker.loadbalance.impl.",
        shed=shed_minutes,
        threshold=threshold,
        grace=shed_minutes * 1.5,
        usage=1 / 60,
        report_ms=400,
        report_max=shed_minutes,
    )
    return (
        f'name = "test-shedding"\nseed = {seed}\n'
        "[cluster.start]\nbrokers = 3\n[cluster.start.config]\n"
        + config
        + "\n[simulate]\nepoch = 1_700_000_000\n"
        + "[simulate.brokers.0]\nconfig = { emubrokerModelMsgRatePerCore = 100 }\n"
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
    owner by about 23 s, 5 s before the restart; the unloaded bundle's clients reconnect at once
    and have 8 s. Stub faults on the way (a stall, two failed writes) must not lose anything.
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
