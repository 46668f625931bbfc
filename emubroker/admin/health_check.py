"""``GET /admin/v2/brokers/health``: produce and read back a message on the heartbeat topic.

Pulsar's ``HealthChecker``: with a client of its own, the broker creates a producer (batching
off) on ``persistent://pulsar/<cluster>/<brokerId>/healthcheck`` (``topicVersion=V2``:
``persistent://pulsar/<brokerId>/healthcheck``), a reader starting at the latest message with
subscription ``healthCheck-<random>``, sends a random string and reads until that string comes
back; the whole read may take 58 s (``DEFAULT_HEALTH_CHECK_READ_TIMEOUT``). Producer and reader are
closed either way. The heartbeat namespaces exist without policies and belong to their broker.

Our client reaches the broker over an in-memory connection (the composition root passes the
connector), so the check runs the whole binary-protocol path (lookup, producer, subscription,
dispatch) without a socket. Its CONNECT carries the broker's own credentials, as Pulsar's broker
client authenticates with ``brokerClientAuthenticationPlugin`` /
``brokerClientAuthenticationParameters`` (read at each check: both are dynamic); with
authentication on, that role must be a super-user (or the anonymous role must be), since the
heartbeat namespaces belong to no tenant anyone administers.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from typing import TYPE_CHECKING, Final

import anyio

from emubroker.naming import NamespaceName
from protocol import commands as c

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.client import Connector
    from protocol.clock import Clock

__all__ = [
    "HEALTH_CHECK_TIMEOUT",
    "HEALTH_CHECK_TOPIC_SUFFIX",
    "HealthCheckError",
    "HealthChecker",
    "heartbeat_namespaces",
]

log = logging.getLogger(__name__)

HEALTH_CHECK_TOPIC_SUFFIX: Final = "healthcheck"
HEALTH_CHECK_TIMEOUT: Final = 58.0
"""Seconds the check may take: less than the admin client's 60 s, as Pulsar chose it."""


class HealthCheckError(Exception):
    """The check failed; the message says how."""


def heartbeat_namespaces(cluster: str, broker_id: str) -> tuple[NamespaceName, NamespaceName]:
    """``pulsar/<cluster>/<brokerId>`` (V1) and ``pulsar/<brokerId>`` (V2) of a broker."""
    return NamespaceName("pulsar", broker_id, cluster), NamespaceName("pulsar", broker_id)


def _cause(exc: BaseException) -> str:
    """The first leaf of nested exception groups, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class HealthChecker:
    """Runs Pulsar's health check against one broker.

    Args:
        cluster: ``clusterName``.
        broker_id: This broker's id.
        connector: Opens a connection to this broker (the service URL's host and port are
            passed and may be ignored).
        clock: Times the check (the timeout is behaviour: 58 s).
        credentials: The CONNECT ``(auth_method_name, auth_data)`` of the broker's own client
            at the time of a check, None for none; raises ValueError for unusable parameters.
        timeout: Seconds the check may take.
    """

    def __init__(
        self,
        *,
        cluster: str,
        broker_id: str,
        connector: Connector,
        clock: Clock,
        credentials: Callable[[], tuple[str, bytes] | None] = lambda: None,
        timeout: float = HEALTH_CHECK_TIMEOUT,
    ) -> None:
        v1, v2 = heartbeat_namespaces(cluster, broker_id)
        self.topics = {
            "V1": f"persistent://{v1}/{HEALTH_CHECK_TOPIC_SUFFIX}",
            "V2": f"persistent://{v2}/{HEALTH_CHECK_TOPIC_SUFFIX}",
        }
        self._service_url = f"pulsar://{broker_id}"
        self._connector = connector
        self._clock = clock
        self._credentials = credentials
        self._timeout = timeout

    async def check(self, topic_version: str = "V1") -> None:
        """Produce one message on the heartbeat topic and read it back.

        Args:
            topic_version: ``V1`` or ``V2`` (Pulsar's ``TopicVersion``).

        Raises:
            HealthCheckError: It failed or timed out.
        """
        topic = self.topics[topic_version]
        try:
            credentials = self._credentials()
        except ValueError as exc:
            raise HealthCheckError(f"brokerClientAuthenticationParameters: {exc}") from None
        authentication = (
            None
            if credentials is None
            else c.AuthData(auth_method_name=credentials[0], auth_data=credentials[1])
        )
        content = str(uuid.uuid4()).encode()
        log.info("running the health check on %s", topic)
        timed_out = False
        try:
            async with anyio.create_task_group() as tg:

                async def watchdog() -> None:
                    nonlocal timed_out
                    await self._clock.sleep(self._timeout)
                    timed_out = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watchdog)
                await self._produce_and_read(topic, content, authentication)
                tg.cancel_scope.cancel()
        except Exception as exc:
            raise HealthCheckError(f"health check on {topic} failed: {_cause(exc)}") from exc
        if timed_out:
            raise HealthCheckError(f"health check on {topic} timed out after {self._timeout} s")

    async def _produce_and_read(
        self, topic: str, content: bytes, authentication: c.AuthData | None
    ) -> None:
        # The client is imported on the first check, not when the broker starts (~35 ms of a
        # broker's start-up imports; docs/performance.md).
        from protocol.client import LATEST, open_client

        async with open_client(
            self._service_url,
            clock=self._clock,
            connector=self._connector,
            operation_timeout=self._timeout,
            keep_alive_interval=None,
            authentication=authentication,
        ) as client:
            producer = await client.create_producer(topic, batching_enabled=False)
            reader = await client.create_reader(
                topic,
                LATEST,
                subscription_role_prefix="healthCheck",
                reader_name=secrets.token_hex(5),
            )
            await producer.send(content)
            while (await reader.read_next()).payload != content:
                pass
