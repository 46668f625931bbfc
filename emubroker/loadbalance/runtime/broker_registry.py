"""The live brokers of a cluster: the ephemeral ``/loadbalance/brokers/<broker id>`` nodes.

Each broker's :class:`~emubroker.loadbalance.reporting.reporter.LoadReporter` holds its node, whose
value is its load report (``LocalBrokerData`` JSON); the node lives as long as the broker's metadata
session, so the children of ``/loadbalance/brokers`` are the brokers that are up (Pulsar's
``getAvailableBrokersAsync`` lists exactly those). Reading a report tolerates nodes that something
else wrote: a node that does not parse is logged and treated as absent, never raised.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from emubroker.loadbalance.model.codec import LoadDataDecodeError, decode
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.metadata.paths import LOAD_REPORTS_ROOT, load_report_path

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore

__all__ = [
    "available_brokers",
    "decode_report",
    "read_report",
    "read_reports",
]

log = logging.getLogger(__name__)


def decode_report(broker_id: str, value: bytes) -> LocalBrokerData | None:
    """A stored report, or None (logged) when the node does not hold one."""
    try:
        return decode(value, LocalBrokerData)
    except LoadDataDecodeError as exc:
        log.warning("ignoring the load report of %s: %s", broker_id, exc)
        return None


async def available_brokers(store: MetadataStore) -> list[str]:
    """The ids of the registered brokers, sorted.

    Raises:
        MetadataStoreError: The store failed.
    """
    return await store.children(LOAD_REPORTS_ROOT)


async def read_report(store: MetadataStore, broker_id: str) -> LocalBrokerData | None:
    """A broker's report; None if it is not registered or its node does not parse.

    Raises:
        MetadataStoreError: The store failed (an invalid id included).
    """
    node = await store.get(load_report_path(broker_id))
    return None if node is None else decode_report(broker_id, node.value)


async def read_reports(store: MetadataStore) -> dict[str, LocalBrokerData]:
    """Every registered broker's report, by broker id, skipping nodes that do not parse.

    Raises:
        MetadataStoreError: The store failed.
    """
    reports: dict[str, LocalBrokerData] = {}
    for broker_id in await available_brokers(store):
        report = await read_report(store, broker_id)
        if report is not None:
            reports[broker_id] = report
    return reports
