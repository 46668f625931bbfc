"""The handle types the network side holds for each producer and consumer.

``ConsumerHandle`` is a Protocol because persistent and non-persistent topics implement consumers
differently; ``ProducerHandle`` is one concrete record (see ``producer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from protocol.commands import AckType, MessageIdData

__all__ = ["ConsumerHandle"]


class ConsumerHandle(Protocol):
    """One attached consumer, as the session sees it (spec/wire-protocol.md §7)."""

    @property
    def consumer_id(self) -> int:
        """The client-chosen consumer id."""
        ...

    @property
    def closed(self) -> bool:
        """True once closed by the client, the broker (seek, unload) or an unsubscribe."""
        ...

    def flow(self, permits: int) -> None:
        """Grant ``permits`` more messages (FLOW); a batch of N takes N."""
        ...

    def resume_delivery(self) -> None:
        """Its connection is writable again: deliver what was held back while it was not."""
        ...

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Apply an ACK; odd ids (before the first entry, unknown ledgers) are no-ops."""
        ...

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES; None or empty means all unacked of this consumer."""
        ...

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """SEEK; closes every consumer of the subscription before returning."""
        ...

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """``((ledger, entry, batch_index) of the topic's last entry, mark-delete position)``.

        Raises:
            BrokerError: The topic cannot tell (non-persistent topics, as in Pulsar).
        """
        ...

    async def close(self) -> None:
        """Detach (CLOSE_CONSUMER or connection drop); unacked messages become redeliverable."""
        ...

    async def unsubscribe(self) -> None:
        """Delete the subscription.

        Raises:
            MetadataError: Other consumers are still attached (Pulsar's answer).
        """
        ...
