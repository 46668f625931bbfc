"""A consumer's seek and position queries (spec §7.5, §7.6, §12, §14.3).

`PositionQueries` is the base class of `Consumer`: SEEK (rule 3 of `consumer`: the broker closes
the consumer, which reattaches, and messages before the target are filtered from then on),
GET_LAST_MESSAGE_ID, and `has_message_available` from them. The state they share with the
receiving side (the receive queue, the restart point, the last message handed out) is the
consumer's, declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol import commands as c
from protocol.client.acks import entry_data
from protocol.client.handler import Handler
from protocol.errors import LocalProtocolError, UnsupportedVersionError
from protocol.ids import LATEST, MessageId

if TYPE_CHECKING:
    from protocol.client.acknowledger import Acknowledger
    from protocol.client.incoming import Incoming
    from protocol.client.receive_queue import ReceiveQueue
    from protocol.client.received import Message

__all__ = ["GET_LAST_MESSAGE_ID_MIN_PROTOCOL", "PositionQueries", "before"]


GET_LAST_MESSAGE_ID_MIN_PROTOCOL = 12
"""Brokers below v12 cannot answer GET_LAST_MESSAGE_ID (spec §12)."""


def before(message_id: MessageId) -> MessageId:
    """The id just before `message_id` (C++ `clearReceiveQueue`)."""
    if message_id.batch_index >= 0:
        return MessageId(
            message_id.ledger_id,
            message_id.entry_id,
            message_id.partition,
            message_id.batch_index - 1,
            message_id.batch_size,
        )
    return MessageId(message_id.ledger_id, message_id.entry_id - 1, message_id.partition)


class PositionQueries(Handler):
    """Seek and position queries of a consumer on one topic or partition (`Consumer`)."""

    # The consumer's state these read and write (set by `Consumer.__init__`).
    consumer_id: int
    partition: int
    _queue: ReceiveQueue
    _incoming: Incoming
    _acker: Acknowledger
    _last_dequeued: Message | None
    _seek_target: MessageId | int | None
    _seek_state: str | None  # None | "in_progress" | "completed"
    _last_seek_by_time: bool

    def flush_acks(self) -> None:
        """Send the grouped acks now (the consumer's)."""
        raise NotImplementedError

    def _reset_for_attach(self) -> None:
        """Pick the restart point and drop prefetched messages (the consumer's rule 2)."""
        raise NotImplementedError

    async def seek(self, target: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish time (ms since the epoch).

        The broker closes the consumer and it reattaches (rule 3); messages before the target
        are then filtered out.

        Raises:
            LocalProtocolError: another seek is in progress.
            BrokerError: the broker refused it.
            OperationTimeoutError: no reply within the operation timeout.
        """
        self._check_usable()
        if self._seek_state is not None:
            raise LocalProtocolError("a seek is already in progress")
        previous = self._seek_target
        self._seek_target = target
        self._seek_state = "in_progress"
        if isinstance(target, MessageId):

            def build(rid: int) -> c.Command:
                data = entry_data(target.ledger_id, target.entry_id)  # never a batch index
                return c.Seek(consumer_id=self.consumer_id, request_id=rid, message_id=data)

        else:

            def build(rid: int) -> c.Command:
                return c.Seek(
                    consumer_id=self.consumer_id, request_id=rid, message_publish_time=target
                )

        try:
            await self._request(build, "SEEK")
        except BaseException:
            self._seek_target = previous
            self._seek_state = None
            raise
        self._last_seek_by_time = not isinstance(target, MessageId)
        self.flush_acks()
        self._acker.grouper.clear()
        if self.is_connected():  # the broker did not close us: apply the seek here
            self._reset_for_attach()
            self._seek_state = None
            return
        self._seek_state = "completed"  # applied by the reattachment (rule 2)
        deadline = self._clock.now() + self._client.operation_timeout
        await self._wait_connected(deadline, "SEEK reattachment")

    async def get_last_message_id_response(self) -> c.GetLastMessageIdResponse:
        """The broker's GET_LAST_MESSAGE_ID_RESPONSE (last id and mark-delete position).

        Raises:
            UnsupportedVersionError: the broker speaks a protocol older than v12 (spec §12).
        """
        deadline = self._clock.now() + self._client.operation_timeout
        cnx = await self._wait_connected(deadline, "GET_LAST_MESSAGE_ID")
        if cnx.protocol_version < GET_LAST_MESSAGE_ID_MIN_PROTOCOL:
            raise UnsupportedVersionError(
                f"GET_LAST_MESSAGE_ID needs protocol v12, the broker speaks v{cnx.protocol_version}"
            )
        reply = await self._request(
            lambda rid: c.GetLastMessageId(consumer_id=self.consumer_id, request_id=rid),
            "GET_LAST_MESSAGE_ID",
        )
        assert isinstance(reply, c.GetLastMessageIdResponse)
        return reply

    async def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message (entry id -1 when the topic is empty).

        Raises:
            BrokerError: the broker refused it.
            OperationTimeoutError: no reply within the operation timeout.
        """
        reply = await self.get_last_message_id_response()
        return MessageId.from_data(reply.last_message_id, partition=self.partition)

    async def has_message_available(self) -> bool:
        """Whether a message after the last one handed out exists (C++ `hasMessageAvailable`).

        Without anything received yet from a start at `latest` (or after a seek by time), the
        answer compares the subscription's mark-delete position with the last entry; an
        inclusive start first seeks to that last entry (spec §7.5, §14.3).

        Raises:
            BrokerError: the broker refused GET_LAST_MESSAGE_ID.
            OperationTimeoutError: no reply within the operation timeout.
        """
        self._check_usable()
        if self._queue.peek(lambda m: m._consumer is self) is not None:
            return True
        by_time = self._last_seek_by_time
        start = self._incoming.start_id
        reply = await self.get_last_message_id_response()
        last = MessageId.from_data(reply.last_message_id, partition=self.partition)
        if self._last_dequeued is None and (start == LATEST or by_time):
            inclusive = self._incoming.inclusive and not by_time
            if inclusive and last.entry_id >= 0:
                await self.seek(last)
            mark = reply.consumer_mark_delete_position
            if mark is None or last.entry_id < 0:
                return False
            ordering = (mark.ledger_id, mark.entry_id), (last.ledger_id, last.entry_id)
            return ordering[0] <= ordering[1] if inclusive else ordering[0] < ordering[1]
        if last.entry_id < 0:
            return False
        # Compare ordering keys: MessageId's derived `>` also counts batch-size differences.
        if self._last_dequeued is not None:
            return last.key > self._last_dequeued.message_id.key
        reference = (start if start is not None else LATEST).key
        return last.key >= reference if self._incoming.inclusive else last.key > reference
