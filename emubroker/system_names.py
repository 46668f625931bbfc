"""System namespaces and topics, as Pulsar tells them apart.

``pulsar/system`` and each broker's heartbeat and SLA-monitor namespaces are system namespaces
(``NamespaceService.isSystemServiceNamespace``); the namespace events, transaction-buffer and
pending-ack topics are system topics in any namespace (``SystemTopicNames.isSystemTopic``). The
load balancer leaves system bundles out of its placements; the topic layer always lets system
topics be auto-created.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from emubroker.naming import TopicName

__all__ = [
    "SYSTEM_NAMESPACE",
    "is_sla_or_heartbeat_namespace",
    "is_system_service_namespace",
    "is_system_topic",
]

# NamespaceService's patterns for the per-broker heartbeat and SLA-monitor namespaces.
_HEARTBEAT: Final = re.compile(r"pulsar/[^/]+/([^:]+:\d+)")
_HEARTBEAT_V2: Final = re.compile(r"pulsar/([^:]+:\d+)")
_SLA: Final = re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)")
SYSTEM_NAMESPACE: Final = "pulsar/system"
# SystemTopicNames.EVENTS_TOPIC_NAMES: the namespace events (topic policies) and the
# transaction buffer's snapshots, in any namespace.
_EVENT_TOPICS: Final = frozenset(
    {
        "__change_events",
        "__transaction_buffer_snapshot",
        "__transaction_buffer_snapshot_indexes",
        "__transaction_buffer_snapshot_segments",
    }
)
_PENDING_ACK_SUFFIX: Final = "__transaction_pending_ack"


@functools.lru_cache(maxsize=4096)
def is_sla_or_heartbeat_namespace(namespace: str) -> bool:
    """Whether ``namespace`` is a broker's heartbeat or SLA-monitor namespace."""
    return any(p.fullmatch(namespace) for p in (_SLA, _HEARTBEAT, _HEARTBEAT_V2))


def is_system_service_namespace(namespace: str) -> bool:
    """``pulsar/system``, or a heartbeat/SLA namespace (``isSystemServiceNamespace``)."""
    return namespace == SYSTEM_NAMESPACE or is_sla_or_heartbeat_namespace(namespace)


def is_system_topic(name: TopicName) -> bool:
    """Pulsar's ``BrokerService.isSystemTopic``: a system namespace's topic, or a system name.

    The system names (``SystemTopicNames.isSystemTopic``) are the namespace events and
    transaction-buffer topics (``__change_events``...) and the transaction pending-ack stores
    (``..__transaction_pending_ack``), in any namespace; a partition of one is one too. (The
    transaction coordinator's topics live in ``pulsar/system``.)
    """
    base = name.partitioned_topic_name
    return (
        is_system_service_namespace(str(name.namespace))
        or base.local_name in _EVENT_TOPICS
        or base.local_name.endswith(_PENDING_ACK_SUFFIX)
    )
