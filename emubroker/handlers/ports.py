"""What a handler needs of its connection: the session's port and the task starter.

Apart from ``common`` so that ``access`` (which ``common`` uses) can name them without a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVarTuple

from emubroker.topics.sinks import ConsumerSink, ProducerSink

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from protocol import commands as c

__all__ = ["SessionPort", "StartSoon"]

Ts = TypeVarTuple("Ts")


class SessionPort(ConsumerSink, ProducerSink, Protocol):
    """What a handler needs of its connection (``net.session.Session`` implements it).

    It is also the sink the handler hands to topics for this connection's consumers and
    producers.
    """

    @property
    def peer(self) -> str:
        """The client's address, for logs and CONSUMER_STATS."""
        ...

    @property
    def peer_certificate(self) -> bytes | None:
        """The TLS client certificate the handshake verified (DER); None without one."""
        ...

    def send_command(self, command: c.Command) -> None:
        """Queue a command for the client (non-blocking)."""
        ...

    def send_receipts(
        self, producer_id: int, sequence_ids: Sequence[int], positions: Sequence[tuple[int, int]]
    ) -> None:
        """Queue SEND_RECEIPTs: each sequence id with its ``(ledger, entry)`` (non-blocking)."""
        ...

    def close(self, reason: str, *, error: bool = True) -> None:
        """Hang up after flushing what is queued."""
        ...

    def pending_publishes(self, count: int, size: int) -> None:
        """This connection now has ``count`` SENDs (``size`` entry bytes) awaiting storage.

        The session stops reading past ``maxPendingPublishRequestsPerConnection`` and counts the
        bytes against ``maxMessagePublishBufferSizeInMB`` (docs/reliability.md).
        """
        ...


class StartSoon(Protocol):
    """Starts a request task in the connection's task group."""

    def __call__(self, fn: Callable[[*Ts], Coroutine[Any, Any, None]], /, *args: *Ts) -> None: ...
