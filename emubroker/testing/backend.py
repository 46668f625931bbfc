"""What a cluster handle needs from the brokers it controls, whatever runs them.

Two backends implement :class:`ClusterBackend`: brokers in a background thread of this process
(``testing.inprocess``) and broker processes under ``emubroker cluster``'s supervisor
(``testing.processes``). Everything else the handle does goes through the brokers' admin REST API,
the same way in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from storage_stub.client import StubClient

__all__ = ["BrokerHandle", "ClusterBackend"]


@dataclass(frozen=True, slots=True)
class BrokerHandle:
    """One broker of a test cluster; its ports (so its id and URLs) survive restarts.

    Attributes:
        index: Its place in the cluster, ``0`` .. ``N-1``.
        id: Pulsar's broker id, ``host:webServicePort`` (what ``leaderBroker`` answers and what
            ``destinationBroker`` takes).
        service_url: ``pulsar://host:port`` of this broker alone.
        admin_url: ``http://host:port`` of its admin API.
    """

    index: int
    id: str
    service_url: str
    admin_url: str


class ClusterBackend(Protocol):
    """Starts, stops and kills brokers; every method is called from the test's thread."""

    mode: str
    portal: BlockingPortal
    """The event loop the brokers (or their supervisor) and :attr:`stub` live on."""
    stub: StubClient
    """A control client of the cluster's bookie stub (fault injection)."""

    def brokers(self) -> list[BrokerHandle]:
        """Every broker, running or not, by index."""
        ...

    def is_running(self, index: int) -> bool:
        """Whether broker ``index`` serves now."""
        ...

    def kill(self, index: int) -> None:
        """End broker ``index`` as a crash does; returns once it is gone."""
        ...

    def stop(self, index: int) -> None:
        """Stop broker ``index`` gracefully (its bundles handed over); returns once it is gone."""
        ...

    def start(self, index: int) -> None:
        """Start broker ``index`` again on its ports; returns once it serves."""
        ...
