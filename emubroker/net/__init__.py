"""The binary-protocol side of the broker: the accept loop and one session per connection."""

from __future__ import annotations

from emubroker.net.guards import NetGuards
from emubroker.net.listener import (
    bind_tcp_sockets,
    create_pulsar_listener,
    listener_from_sockets,
    listener_port,
    serve_pulsar,
)
from emubroker.net.session import RECEIVE_SIZE, FrameHandler, HandlerFactory, Session
from emubroker.net.traffic import TrafficCounter, TrafficSnapshot

__all__ = [
    "RECEIVE_SIZE",
    "FrameHandler",
    "HandlerFactory",
    "NetGuards",
    "Session",
    "TrafficCounter",
    "TrafficSnapshot",
    "bind_tcp_sockets",
    "create_pulsar_listener",
    "listener_from_sockets",
    "listener_port",
    "serve_pulsar",
]
