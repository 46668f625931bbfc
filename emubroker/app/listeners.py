"""The broker's ports: bound before its services start, served once they run.

The binary protocol's and the admin API's ports, each with its TLS twin when configured (Pulsar's
``Optional<Integer>`` ports); a port asked as 0 is bound first, so that the configuration, the
URLs and the cluster's metadata name the real one.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import msgspec

from emubroker.admin import build_admin_app, serve_admin
from emubroker.net import bind_tcp_sockets, listener_from_sockets, serve_pulsar
from protocol.framing import FRAME_PADDING

if TYPE_CHECKING:
    import socket
    import ssl
    from contextlib import AsyncExitStack

    from anyio.abc import TaskGroup

    from emubroker.admin import AdminContext
    from emubroker.config import BrokerConfig
    from emubroker.net import HandlerFactory, NetGuards, TrafficCounter
    from protocol.clock import Clock

log = logging.getLogger(__name__)


class BoundPorts(msgspec.Struct, frozen=True):
    """The sockets a broker bound and the URLs they answer at.

    Attributes:
        config: The configuration with the real ports when 0 was asked for.
        pulsar: The binary protocol's sockets (none without ``listen``).
        admin: The admin API's sockets (none without ``admin``).
        pulsar_tls: ``brokerServicePortTls``'s sockets, when configured.
        admin_tls: ``webServicePortTls``'s sockets, when configured.
        service_url: ``pulsar://host:port``.
        admin_url: ``http://host:port``, ``""`` when not served.
        service_url_tls: ``pulsar+ssl://host:port``, else ``""``.
        admin_url_tls: ``https://host:port``, else ``""``.
    """

    config: BrokerConfig
    pulsar: list[socket.socket]
    admin: list[socket.socket]
    pulsar_tls: list[socket.socket]
    admin_tls: list[socket.socket]
    service_url: str
    admin_url: str
    service_url_tls: str
    admin_url_tls: str


async def bind_ports(
    stack: AsyncExitStack, config: BrokerConfig, *, listen: bool, admin: bool
) -> BoundPorts:
    """Bind the broker's ports; ``stack`` closes them on the way out.

    Raises:
        OSError: A port cannot be bound.
    """
    host = config.advertised_host()
    pulsar_sockets = (
        await bind_tcp_sockets(config.bindAddress, config.brokerServicePort) if listen else []
    )
    # Closed on the way out whatever happens; a no-op for sockets a server already closed.
    stack.callback(_close_sockets, pulsar_sockets)
    admin_sockets = (
        await bind_tcp_sockets(config.bindAddress, config.webServicePort) if admin else []
    )
    stack.callback(_close_sockets, admin_sockets)
    pulsar_tls_sockets = await _bind_optional(
        config.bindAddress, config.brokerServicePortTls if listen else None
    )
    stack.callback(_close_sockets, pulsar_tls_sockets)
    admin_tls_sockets = await _bind_optional(
        config.bindAddress, config.webServicePortTls if admin else None
    )
    stack.callback(_close_sockets, admin_tls_sockets)
    ports: dict[str, int] = {}
    for key, bound in (
        ("brokerServicePort", pulsar_sockets),
        ("webServicePort", admin_sockets),
        ("brokerServicePortTls", pulsar_tls_sockets),
        ("webServicePortTls", admin_tls_sockets),
    ):
        if bound:
            ports[key] = bound[0].getsockname()[1]
    config = msgspec.structs.replace(config, **ports)
    service_url = f"pulsar://{host}:{config.brokerServicePort}"
    admin_url = f"http://{host}:{config.webServicePort}" if admin else ""
    service_url_tls = (
        f"pulsar+ssl://{host}:{config.brokerServicePortTls}"
        if config.brokerServicePortTls is not None
        else ""
    )
    admin_url_tls = (
        f"https://{host}:{config.webServicePortTls}"
        if config.webServicePortTls is not None and admin
        else ""
    )
    return BoundPorts(
        config,
        pulsar_sockets,
        admin_sockets,
        pulsar_tls_sockets,
        admin_tls_sockets,
        service_url,
        admin_url,
        service_url_tls,
        admin_url_tls,
    )


async def serve_ports(
    tg: TaskGroup,
    ports: BoundPorts,
    handler_factory: HandlerFactory,
    admin_context: AdminContext,
    *,
    clock: Clock,
    ssl_context: ssl.SSLContext | None,
    traffic: TrafficCounter,
    guards: NetGuards,
) -> None:
    """Serve the bound ports in ``tg``: new connections from now on reach the broker."""
    config = ports.config
    pulsar_sockets, pulsar_tls_sockets = ports.pulsar, ports.pulsar_tls
    admin_sockets, admin_tls_sockets = ports.admin, ports.admin_tls
    if pulsar_sockets:
        listener = await listener_from_sockets(pulsar_sockets, clock=clock)
        await tg.start(
            partial(
                serve_pulsar,
                listener,
                handler_factory,
                clock=clock,
                max_frame_size=config.maxMessageSize + FRAME_PADDING,
                keepalive_interval=config.keepAliveIntervalSeconds,
                traffic=traffic,
                guards=guards,
            )
        )
    if pulsar_tls_sockets:
        await tg.start(
            partial(
                serve_pulsar,
                await listener_from_sockets(pulsar_tls_sockets, clock=clock),
                handler_factory,
                clock=clock,
                max_frame_size=config.maxMessageSize + FRAME_PADDING,
                keepalive_interval=config.keepAliveIntervalSeconds,
                ssl_context=ssl_context,
                traffic=traffic,
                guards=guards,
            )
        )
    if admin_sockets or admin_tls_sockets:
        await tg.start(
            partial(
                serve_admin,
                build_admin_app(admin_context),
                admin_sockets,
                tls_sockets=admin_tls_sockets,
                ssl_context=ssl_context,
            )
        )
    # DEBUG: the command line prints its ready line with the same URLs.
    log.debug(
        "broker serving %s (admin %s)",
        " ".join(filter(None, (ports.service_url, ports.service_url_tls))),
        " ".join(filter(None, (ports.admin_url, ports.admin_url_tls))) or "off",
    )


async def _bind_optional(host: str, port: int | None) -> list[socket.socket]:
    # A TLS port is bound only when configured (Pulsar's Optional<Integer> ports).
    return [] if port is None else await bind_tcp_sockets(host, port)


def _close_sockets(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()
