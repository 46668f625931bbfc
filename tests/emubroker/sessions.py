"""A session of a real broker's handlers over a stand-in topic service, for handler tests."""

from __future__ import annotations

from typing import Any

from emubroker.app import Broker
from emubroker.handlers import BrokerServices, ConnectionHandler
from emubroker.handlers.lookups import LookupLimit
from emubroker.net.guards import NetGuards
from emubroker.net.session import Session
from tests.support.broker import MemoryByteStream, WireClient, memory_stream_pair


def session_over(
    broker: Broker,
    topics: Any,
    *,
    guards: NetGuards | None = None,
    lookups: LookupLimit | None = None,
) -> tuple[Session, WireClient, MemoryByteStream]:
    """A session (not running yet) serving ``broker``'s handlers with ``topics`` as the topic
    service, its client, and the client's end of the stream."""
    services = BrokerServices(
        config=broker.config,
        topics=topics,
        ownership=broker.ownership,
        namespace_exists=broker.namespaces,
        **({} if lookups is None else {"lookups": lookups}),
    )
    client_end, server_end = memory_stream_pair()
    session = Session(
        server_end,
        lambda s: ConnectionHandler(services, s),
        clock=broker.clock,
        max_frame_size=1 << 20,
        keepalive_interval=30,
        guards=guards,
    )
    return session, WireClient(client_end), client_end
