"""Wiring of a broker's load report: its usage source, its topics' traffic and its fixed fields.

The composition root (``app/wiring.py``) calls :func:`build_load_reporter` with the topic service
and the sessions' byte counter. The load layer does not import either (``topics`` and
``loadbalance`` are independent layers): it reads the topic service's counters through the
structural :class:`TopicStatsSource` and the counter through a plain callable. This module also
picks the ``ResourceUsageSource`` the configuration names (docs/load-balancing.md, "Load
reports").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Protocol

from emubroker import __version__
from emubroker.config import ConfigError
from emubroker.loadbalance.load_managers import load_manager
from emubroker.loadbalance.model.data import AdvertisedListener, LocalBrokerData
from emubroker.loadbalance.reporting.bundle_sampler import TopicTraffic
from emubroker.loadbalance.reporting.psutil_source import (
    PsutilUsageSource,
    host_memory_mb,
    host_processors,
    nic_speed_kbps,
)
from emubroker.loadbalance.reporting.reporter import LoadReporter
from emubroker.loadbalance.reporting.usage_sources import (
    DEFAULT_MODEL_NIC_SPEED_GBPS,
    KBIT_PER_GBIT,
    ModelUsageSource,
    ResourceLimits,
    ScriptedUsageSource,
    UsageScriptError,
    load_usage_script,
)
from emubroker.loadbalance.trace.records import report_record
from emubroker.loadbalance.trace.sink import LoadBalancerTraceSink
from emubroker.naming import TopicName

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.reporting.usage_sources import ResourceUsageSource
    from emubroker.loadbalance.trace.records import TraceSink
    from emubroker.metadata import MetadataStore
    from protocol.clock import Clock

__all__ = [
    "BROKER_VERSION",
    "TopicStatsSource",
    "build_load_reporter",
    "load_balancer_trace",
    "resource_limits",
    "usage_source",
]


class _TopicCounters(Protocol):
    """What a topic's sample (``topics.stats.TopicLoad``) carries for the report."""

    @property
    def name(self) -> TopicName: ...
    @property
    def msg_in(self) -> int: ...
    @property
    def bytes_in(self) -> int: ...
    @property
    def msg_out(self) -> int: ...
    @property
    def bytes_out(self) -> int: ...
    @property
    def producers(self) -> int: ...
    @property
    def consumers(self) -> int: ...


class TopicStatsSource(Protocol):
    """The topic service as the report reads it: ``TopicService.loads()``."""

    def loads(self) -> Sequence[_TopicCounters]: ...


log = logging.getLogger(__name__)


BROKER_VERSION: Final = __version__
"""``brokerVersionString``: the package's semantic version, as Pulsar reports its own."""


def resource_limits(config: BrokerConfig) -> ResourceLimits:
    """The report's limits: processors, memory and NIC speed, from the keys or the host."""
    model = config.emubrokerResourceUsageSource == "model"
    nic = config.loadBalancerOverrideBrokerNicSpeedGbps
    return ResourceLimits(
        processors=config.emubrokerAvailableProcessors or host_processors(),
        memory_mb=float(config.emubrokerMaxMemoryMB) or host_memory_mb(),
        nic_kbps=(nic or DEFAULT_MODEL_NIC_SPEED_GBPS) * KBIT_PER_GBIT
        if model
        else nic_speed_kbps(nic),
    )


def usage_source(config: BrokerConfig, broker_id: str) -> ResourceUsageSource:
    """The ``ResourceUsageSource`` the configuration names.

    Raises:
        ConfigError: ``emubrokerResourceUsageScript`` cannot be read, or is set for the psutil
            source.
    """
    limits = resource_limits(config)
    script = config.emubrokerResourceUsageScript
    if config.emubrokerResourceUsageSource == "psutil":
        if script:
            raise ConfigError(
                "emubrokerResourceUsageScript needs emubrokerResourceUsageSource=model"
            )
        return PsutilUsageSource(limits)
    if not script:
        return ModelUsageSource(limits, msg_rate_per_core=config.emubrokerModelMsgRatePerCore)
    try:
        steps = load_usage_script(script).steps_of(broker_id)
    except UsageScriptError as exc:
        raise ConfigError(f"emubrokerResourceUsageScript: {exc}") from exc
    return ScriptedUsageSource(limits, steps)


def load_balancer_trace(
    config: BrokerConfig, broker_id: str, *, in_thread: bool = True
) -> LoadBalancerTraceSink | None:
    """The broker's load-balancer trace sink, if ``emubrokerLoadBalancerTraceDir`` is set."""
    directory = config.emubrokerLoadBalancerTraceDir
    if not directory:
        return None
    return LoadBalancerTraceSink(directory, broker_id=broker_id, in_thread=in_thread)


def initial_report(
    config: BrokerConfig, *, web_url: str, web_url_tls: str, service_url: str, service_url_tls: str
) -> LocalBrokerData:
    """``LocalBrokerData`` as Pulsar's ``ModularLoadManagerImpl.start`` builds it."""
    return LocalBrokerData(
        web_service_url=web_url or None,
        web_service_url_tls=web_url_tls or None,
        pulsar_service_url=service_url or None,
        pulsar_service_url_tls=service_url_tls or None,
        advertised_listeners={
            name: AdvertisedListener(broker_service_url=url)
            for name, url in config.listeners().items()
        },
        broker_version_string=BROKER_VERSION,
        load_manager_class_name=config.loadManagerClassName,
    )


def topic_traffic(
    topics: TopicStatsSource, ownership: OwnershipTable
) -> Callable[[], list[TopicTraffic]]:
    """The loaded topics' counters with their bundles, read through the topic service.

    Bundles are looked up at every read (once per ``statsUpdateFrequencyInSecs``), so a split
    namespace's topics count in their new bundles at once.
    """

    def read() -> list[TopicTraffic]:
        return [
            TopicTraffic(
                name=str(t.name),
                bundle=str(ownership.bundle_of(t.name)),
                msg_in=t.msg_in,
                bytes_in=t.bytes_in,
                msg_out=t.msg_out,
                bytes_out=t.bytes_out,
                producers=t.producers,
                consumers=t.consumers,
            )
            for t in topics.loads()
        ]

    return read


def build_load_reporter(
    store: MetadataStore,
    clock: Clock,
    *,
    broker_id: str,
    config: Callable[[], BrokerConfig],
    urls: tuple[str, str, str, str],
    topics: TopicStatsSource,
    ownership: OwnershipTable,
    traffic: Callable[[], tuple[int, int, int]],
    trace: TraceSink | None = None,
) -> LoadReporter:
    """The broker's load reporter; run it before the broker serves lookups.

    Args:
        store: The broker's metadata session.
        clock: The broker's clock.
        broker_id: ``host:webServicePort``.
        config: The live configuration.
        urls: ``(http, https, pulsar, pulsar+ssl)`` URLs, empty when not served.
        topics: The topic service (its statistics give the bundles' traffic).
        ownership: Maps topics to bundles.
        traffic: The sessions' byte totals ``(in, out, buffered)`` (``TrafficCounter.snapshot``).
        trace: Where a ``report`` row goes for each report written (the load-balancer trace).

    Raises:
        ConfigError: The usage source cannot be built (see :func:`usage_source`).
    """
    start = config()
    web_url, web_url_tls, service_url, service_url_tls = urls
    on_written = None
    if trace is not None:
        sink = trace

        def on_written(report: LocalBrokerData, why: str) -> None:
            live = config()
            sink.append(
                report_record(
                    broker_id,
                    report,
                    live,
                    wall_ns=clock.wall_ns(),
                    monotonic=clock.now(),
                    reason=why,
                    load_manager=load_manager(live).name,
                )
            )

    return LoadReporter(
        store,
        clock,
        broker_id=broker_id,
        initial=initial_report(
            start,
            web_url=web_url,
            web_url_tls=web_url_tls,
            service_url=service_url,
            service_url_tls=service_url_tls,
        ),
        config=config,
        usage=usage_source(start, broker_id),
        topics=topic_traffic(topics, ownership),
        traffic=traffic,
        on_written=on_written,
    )
