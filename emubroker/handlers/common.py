"""What the command groups of one connection share: the session port, services, helpers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import msgspec

from emubroker import __version__
from emubroker.handlers.lookups import LookupLimit
from emubroker.handlers.ports import SessionPort, StartSoon
from emubroker.naming import InvalidNameError, TopicName
from emubroker.topics.requests import ClientInfo
from protocol.errors import BrokerError, InvalidTopicNameError, UnknownError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from emubroker.auth import Security
    from emubroker.config import BrokerConfig
    from emubroker.handlers.access import ConnectionAccess
    from emubroker.loadbalance.ownership.lookup import BundleLookup
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.naming import NamespaceName
    from emubroker.schemas import SchemaService
    from emubroker.topics import TopicService
    from protocol.clock import Clock

__all__ = [
    "SERVER_VERSION",
    "BrokerServices",
    "CommandGroup",
    "ConnectionInfo",
    "SessionPort",
    "StartSoon",
    "as_broker_error",
    "topic_name",
]

log = logging.getLogger(__name__)


SERVER_VERSION: Final = f"emubroker-{__version__}"
"""``CONNECTED.server_version`` (spec §3.1: any string, but it must be there)."""


class BrokerServices(msgspec.Struct, frozen=True):
    """What every connection's handler shares: built once by the app.

    Attributes:
        config: The broker configuration.
        topics: The topic registry.
        ownership: The bundle -> owner table answering lookups.
        namespace_exists: Whether a namespace exists (tenants/namespaces live in the metadata
            store; the app keeps this view current).
        read_namespace: ``namespace_exists``, reading the store when the view has not seen the
            namespace yet (one created through another broker a moment ago); None: the view
            alone answers.
        listeners: ``advertisedListeners`` by name, for LOOKUPs naming a listener.
        schemas: Schema decisions for PRODUCER, SUBSCRIBE and GET_SCHEMA (§11); None keeps no
            schemas (every schema accepted as version 0, GET_SCHEMA answers TopicNotFound).
        security: Authentication and authorization (``emubroker.auth``); None: neither.
        clock: Drives credential refresh checks (only used with authentication).
        lookup: Answers LOOKUPs across brokers and refuses producers and consumers of topics
            this broker does not serve; None: every topic is served here (component tests).
        lookups: Lookups in flight over the broker (``maxConcurrentLookupRequest``).
    """

    config: BrokerConfig
    topics: TopicService
    ownership: OwnershipTable
    namespace_exists: Callable[[NamespaceName], bool]
    read_namespace: Callable[[NamespaceName], Awaitable[bool]] | None = None
    listeners: dict[str, str] = msgspec.field(default_factory=dict)
    schemas: SchemaService | None = None
    security: Security | None = None
    clock: Clock | None = None
    lookup: BundleLookup | None = None
    lookups: LookupLimit = msgspec.field(default_factory=LookupLimit)


class ConnectionInfo:
    """What the connection's CONNECT said of the client (the admin stats show it)."""

    __slots__ = ("client_version",)

    def __init__(self) -> None:
        self.client_version = ""


class CommandGroup:
    """Base of the per-connection command groups (producers, consumers, discovery).

    Args:
        services: The broker's shared services.
        session: The connection.
        start: Starts request tasks in the connection's task group.
        access: The connection's identity and permission checks; None without authentication.
        info: What CONNECT said, shared by the connection's groups.
    """

    def __init__(
        self,
        services: BrokerServices,
        session: SessionPort,
        start: StartSoon,
        access: ConnectionAccess | None = None,
        info: ConnectionInfo | None = None,
    ) -> None:
        self._info = ConnectionInfo() if info is None else info
        self._access = access
        self._services = services
        self._topics = services.topics
        self._session = session
        self._send = session.send_command
        self._start = start

    def _client(self) -> ClientInfo:
        """Who is asking, for a new producer or consumer (admin stats), as of now."""
        clock = self._services.clock
        return ClientInfo(
            address=self._session.peer,
            client_version=self._info.client_version,
            since_ms=0 if clock is None else clock.wall_ms(),
        )

    async def _check_serving(self, name: TopicName) -> None:
        """Refuse a topic this broker does not serve (``ServiceNotReadyError``, §3.1)."""
        lookup = self._services.lookup
        if lookup is not None:
            await lookup.check_serving(name)


def topic_name(name: str) -> TopicName:
    """Parse a topic name from a command.

    Raises:
        InvalidTopicNameError: The name is malformed (the client's error for it).
    """
    try:
        return TopicName.parse(name)
    except InvalidNameError as exc:
        raise InvalidTopicNameError(str(exc)) from None


def as_broker_error(exc: Exception, what: str) -> BrokerError:
    """The error to answer with: domain errors as they are, anything else as UnknownError."""
    if isinstance(exc, BrokerError):
        return exc
    log.exception("unexpected failure handling %s", what)
    return UnknownError(f"{what} failed: {exc!r}")
