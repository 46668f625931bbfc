"""Small simulation scenarios for the tests: seconds of wall time, decisions guaranteed.

Broker 0 (the leader) is the weak machine: its model usage counts its core busy at 100 msg/s,
the others' at 1,000, so the same traffic loads it ten times as much and the ThresholdShedder
unloads its bundles. Topic rates are powers of two, so every bundle's throughput differs from
every other's and the shedder's choice (largest first) cannot hinge on measurement noise.
"""

from __future__ import annotations

BROKER_CONFIG = """
defaultNumberOfNamespaceBundles = 4
emubrokerModelMsgRatePerCore = 1000
emubrokerAvailableProcessors = 1
loadBalancerLoadSheddingStrategy = "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
loadBalancerBrokerThresholdShedderPercentage = 10
loadBalancerBundleUnloadMinThroughputThreshold = 0.0001
loadBalancerHistoryResourcePercentage = 0.1
loadBalancerSheddingIntervalMinutes = {shed}
loadBalancerSheddingGracePeriodMinutes = {grace}
loadBalancerHostUsageCheckIntervalMinutes = {usage}
loadBalancerReportUpdateMinIntervalMillis = {report_ms}
loadBalancerReportUpdateMaxIntervalMinutes = {report_max}
statsUpdateFrequencyInSecs = 1
"""

TOPICS = """
[[topics]]
name = "t1"
[[topics]]
name = "t2"
[[topics]]
name = "t3"
[[topics]]
name = "t4"
[[topics]]
name = "t5"
[[topics]]
name = "t6"
"""


def traffic(rates: list[int]) -> str:
    """A producer and a consumer per topic, ``rates[i]`` msg/s on topic ``t<i+1>``."""
    groups = []
    for index, rate in enumerate(rates, start=1):
        groups.append(
            f'[[producers]]\nname = "p{index}"\ntopic = "t{index}"\nrate = {rate}\nsize = 200\n'
            f'[[consumers]]\nname = "c{index}"\ntopic = "t{index}"\nsubscription = "s"\n'
        )
    return "\n".join(groups)


def shedding_scenario(*, seconds: float, shed_minutes: float, seed: int = 5) -> str:
    """Three brokers, six topics, shedding every ``shed_minutes``; the run lasts ``seconds``."""
    config = BROKER_CONFIG.format(
        shed=shed_minutes,
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
        + TOPICS
        + traffic([1, 2, 4, 8, 16, 32])
        + f'\n[[phases]]\nname = "run"\nduration = "{seconds:g}s"\n'
    )
