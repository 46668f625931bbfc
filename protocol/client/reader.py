"""Readers: non-durable consumers that start at a chosen message (spec §7.1, §14.3).

A reader subscribes Exclusive with `durable=false`, a `reader-<10 hex>` subscription name and
`start_message_id` (earliest, latest or any id, batch index included); its subscription exists
only while it is attached. After a reconnect it restarts after the last message it handed out.
"""

from __future__ import annotations

from protocol.client.consumer import Consumer
from protocol.client.partitioned import MultiConsumer
from protocol.client.received import Message
from protocol.errors import ClientClosedError
from protocol.ids import LATEST, MessageId

__all__ = ["Reader"]


class Reader:
    """Reads a topic from a start position. Create it with `Client.create_reader`."""

    def __init__(self, consumer: Consumer | MultiConsumer) -> None:
        self._consumer = consumer

    def __repr__(self) -> str:
        return f"<Reader {self.topic}>"

    @property
    def topic(self) -> str:
        """The topic the reader reads."""
        return self._consumer.topic

    @property
    def subscription(self) -> str:
        """The name of the reader's non-durable subscription."""
        return self._consumer.subscription

    async def __aenter__(self) -> Reader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.read_next()
        except ClientClosedError:
            raise StopAsyncIteration from None

    async def _start(self, start: MessageId, inclusive: bool) -> None:
        await self._consumer._start()
        consumer = self._consumer
        if inclusive and start == LATEST and isinstance(consumer, Consumer):
            # "latest, inclusive" means "the last message": find it and seek there (spec §14.3).
            last = await consumer.get_last_message_id()
            if last.entry_id >= 0:
                await consumer.seek(last)

    async def read_next(self) -> Message:
        """Wait for the next message (bound the wait with a cancel scope if needed).

        Raises:
            ConsumerClosedError: the reader is closed.
        """
        return await self._consumer.receive()

    def read_nowait(self) -> Message | None:
        """The next prefetched message, or None."""
        return self._consumer.receive_nowait()

    async def has_message_available(self) -> bool:
        """Whether a message after the last one read exists (asks GET_LAST_MESSAGE_ID).

        Raises:
            BrokerError: the broker refused the request.
            OperationTimeoutError: no reply within the operation timeout.
        """
        return await self._consumer.has_message_available()

    async def seek(self, target: MessageId | int) -> None:
        """Move to a message id or a publish time (ms since the epoch); see `Consumer.seek`."""
        await self._consumer.seek(target)

    def is_connected(self) -> bool:
        """True while the reader is attached to a broker."""
        return self._consumer.is_connected()

    async def aclose(self) -> None:
        """Close the reader (its non-durable subscription goes away with it)."""
        await self._consumer.aclose()
