"""One broker in a background thread, for the ``pulsar_broker`` fixture and your own.

The broker runs in a background thread with its own event loop (anyio's asyncio backend, through
``anyio.from_thread.start_blocking_portal``), so the fixture works from synchronous tests, from
the official client's own threads, and from async tests on any loop. It binds free ports on
127.0.0.1 and ::1 and starts in milliseconds. For another scope, use :func:`run_broker_in_thread`
in a fixture of your own.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, TypeVar

from anyio.from_thread import start_blocking_portal

from emubroker.app import open_broker
from emubroker.config import load_config

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from anyio.from_thread import BlockingPortal

    from emubroker.app import Broker

__all__ = ["RunningBroker", "run_broker_in_thread"]

T = TypeVar("T")


class RunningBroker:
    """A broker served from a background thread.

    Attributes:
        broker: The ``emubroker.app.Broker`` (its methods must run on the broker's loop: use
            :meth:`call`).
        service_url: ``pulsar://127.0.0.1:<port>``.
        admin_url: ``http://127.0.0.1:<port>``.
        service_url_tls: ``pulsar+ssl://127.0.0.1:<port>`` with ``brokerServicePortTls``.
        admin_url_tls: ``https://127.0.0.1:<port>`` with ``webServicePortTls``.
    """

    def __init__(self, broker: Broker, portal: BlockingPortal) -> None:
        self.broker = broker
        self.service_url = broker.service_url
        self.admin_url = broker.admin_url
        self.service_url_tls = broker.service_url_tls
        self.admin_url_tls = broker.admin_url_tls
        self._portal = portal

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the broker's event loop and return its result.

        For example ``running.call(running.broker.topics.unload, TopicName.parse("t"))``.
        """
        return self._portal.call(fn, *args)


@contextlib.contextmanager
def run_broker_in_thread(**overrides: Any) -> Iterator[RunningBroker]:
    """Start a broker on free ports in a background thread; stop it on exit.

    Args:
        **overrides: ``broker.conf`` keys to set (e.g. ``allowAutoTopicCreation=False``).

    Yields:
        The running broker.
    """
    config = load_config(overrides={"brokerServicePort": 0, "webServicePort": 0, **overrides})
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(open_broker(config, alone=True)) as broker,
    ):
        yield RunningBroker(broker, portal)
