"""The ``broker.conf`` keys that bound what clients can cost the broker (Pulsar's names).

:class:`ProtectionConfig` sits between the load manager's keys and
:class:`~emubroker.config.BrokerConfig` in the line of bases (msgspec structs take fields from one
base). docs/reliability.md tells what each limit does and how the broker holds under abuse.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from emubroker.config.loadbalancer import LoadBalancerConfig

__all__ = ["DEFAULT_PUBLISH_BUFFER_MB", "ProtectionConfig"]

_Count = Annotated[int, msgspec.Meta(ge=0)]

DEFAULT_PUBLISH_BUFFER_MB: Final = 64
"""``maxMessagePublishBufferSizeInMB`` when unset. Pulsar's default is half the JVM's direct
memory, at least 64 MB; a Python process has no direct memory to take half of, so ours is that
floor: it holds a dozen ``maxMessageSize`` messages in flight, and bench/abuse.py shows a
durable broker (``--data-dir``) publishing at full speed keeps a few MiB pending."""


class ProtectionConfig(LoadBalancerConfig, frozen=True, forbid_unknown_fields=True):
    """Limits on connections, pending publishes, topics and HTTP requests (Pulsar's defaults).

    Attributes:
        maxPendingPublishRequestsPerConnection: SENDs one connection may have waiting for
            storage; at this many the broker stops reading the connection, and reads again once
            half of them completed (Pulsar's ``ServerCnx`` back-pressure).
        maxMessagePublishBufferSizeInMB: Bytes (MiB) of SENDs the whole broker may have waiting
            for storage; above it the broker stops reading every connection, and reads again
            below half. ``-1`` turns the limit off; unset is ``DEFAULT_PUBLISH_BUFFER_MB``.
        brokerMaxConnections: Connections the broker accepts at once (0: no limit); one more is
            answered ERROR ``NotAllowedError`` and closed.
        brokerMaxConnectionsPerIp: The same, per client address (0: no limit).
        maxTopicsPerNamespace: Persistent topics (partitions count one each) a namespace may
            hold (0: no limit); a namespace's ``max_topics_per_namespace`` policy wins.
        maxNumPartitionsPerPartitionedTopic: Partitions a partitioned topic may have (0: no
            limit of Pulsar's; ours still caps it, see ``emubroker.topics.limits``).
        httpMaxRequestSize: Largest HTTP request body the admin API reads, in bytes (-1: no
            limit of Pulsar's; ours still caps it, see ``emubroker.admin.app``).
        maxConcurrentLookupRequest: LOOKUPs and PARTITIONED_METADATAs in flight over the broker;
            past it they are answered ``TooManyRequests`` (``emubroker.handlers.lookups``).
    """

    maxPendingPublishRequestsPerConnection: _Count = 1000
    maxMessagePublishBufferSizeInMB: Annotated[int, msgspec.Meta(ge=-1)] = DEFAULT_PUBLISH_BUFFER_MB
    brokerMaxConnections: _Count = 0
    brokerMaxConnectionsPerIp: _Count = 0
    maxTopicsPerNamespace: _Count = 0
    maxNumPartitionsPerPartitionedTopic: _Count = 0
    httpMaxRequestSize: Annotated[int, msgspec.Meta(ge=-1)] = -1
    maxConcurrentLookupRequest: _Count = 50_000

    def publish_buffer_bytes(self) -> int:
        """``maxMessagePublishBufferSizeInMB`` in bytes; 0 when the limit is off (0 or -1)."""
        mb = self.maxMessagePublishBufferSizeInMB
        return 0 if mb <= 0 else mb * 1024 * 1024
