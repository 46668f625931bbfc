"""Producers: SEND pipelining, receipts, batching, chunking, send timeouts, reattachment.

Rules (spec §6, §8.1, §8.4, §9):

1. Sequence ids start at `last_sequence_id + 1` from the first PRODUCER_SUCCESS (or after the
   user's `initial_sequence_id`) and grow by one per message; a batch's SEND carries its first
   message's sequence id, a chunked message's chunks all carry the message's.
2. Every SEND is an op in the pending queue, in send order. A receipt is matched to the head:
   a sequence id beyond the head's last is a broker bug (the connection is dropped), one before
   the head's first is stale (its op timed out) and is ignored.
3. Message *i* of a batch gets the id (ledger, entry, partition, i) with batch size N; an
   unbatched message (ledger, entry, partition, -1); a chunked message the id of its last chunk.
4. The queue holds at most `max_pending_messages` messages; `send_async` waits for room.
5. After every (re)attachment all pending SENDs are written again, in order, byte for byte.
6. An op whose send timeout passes fails with `OperationTimeoutError` (checked at the head).

The pending queue, its receipts and timeouts (rules 2, 3, 4's bound, 6) are `pending`'s
(`PendingSends` is the base class); building and batching SENDs (rules 1, 5) is this module's.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from protocol import commands as c
from protocol.client._util import Future, with_deadline
from protocol.client.chunks import build_chunks
from protocol.client.config import ProducerConfig
from protocol.client.handler import ENDED_STATES, HandlerState
from protocol.client.messages import CHECKSUM_MIN_PROTOCOL, BatchBuilder, PlainSends, build_single
from protocol.client.pending import PendingOp, PendingSends
from protocol.errors import (
    ClientClosedError,
    MessageTooBigError,
    OperationTimeoutError,
    ProducerClosedError,
)
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.connection import ClientConnection
    from protocol.client.host import HandlerHost

__all__ = ["Producer", "SendCallback"]

logger = logging.getLogger(__name__)

SendCallback = Callable[[Future[MessageId]], None]


class Producer(PendingSends):
    """A producer on one topic or one partition. Create it with `Client.create_producer`."""

    def __init__(
        self, client: HandlerHost, topic: str, config: ProducerConfig, *, partition: int = -1
    ) -> None:
        super().__init__(client, topic)
        self._config = config
        self.partition = partition
        self.producer_id = client.new_producer_id()
        self.producer_name: str = config.producer_name or ""
        self._epoch = 0
        self._topic_epoch: int | None = None
        self._next_seq: int | None = (
            None if config.initial_sequence_id is None else config.initial_sequence_id + 1
        )
        self.last_sequence_id = -1
        self._max_message_size = 0
        self._checksum = True
        self._plain = PlainSends(self.producer_id, self.producer_name, 0, True)
        # Config values read per message, as attributes of their own.
        self._max_pending = config.max_pending_messages
        self._send_timeout = config.send_timeout
        self._batch_max_messages = config.batching_max_messages
        self._batch_max_bytes = config.batching_max_bytes
        self._listener = config.receipt_listener
        self._pending: deque[PendingOp] = deque()
        self._pending_messages = 0
        self._room: anyio.Event | None = None
        self._pending_armed: anyio.Event | None = None
        self._batch = BatchBuilder() if config.batching_enabled else None
        # Set to a batch's flush time by its first message, without waking the timer task.
        self._batch_due = self._clock.timer(self._flush_batch)
        self._batch_delay = config.batching_max_publish_delay
        self._metadata = tuple(
            c.KeyValue(key=k, value=v) for k, v in (config.properties or {}).items()
        )

    def __repr__(self) -> str:
        return f"<Producer {self.topic} id={self.producer_id} {self._state.value}>"

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _closed_error(self) -> ClientClosedError:
        return ProducerClosedError(f"producer on {self.topic} is closed")

    # ---- attaching -----------------------------------------------------------------------------

    async def _attach(self, cnx: ClientConnection, deadline: float) -> None:
        cnx.add_producer(self.producer_id, self)
        epoch, self._epoch = self._epoch, self._epoch + 1  # spec §6.1: +1 per attempt
        command = c.Producer(
            topic=self.topic,
            producer_id=self.producer_id,
            request_id=cnx.new_request_id(),
            producer_name=self.producer_name or None,
            metadata=self._metadata,
            schema=self._config.schema,
            epoch=epoch,
            # spec §9: the broker-assigned name is sent back on reconnect, still flagged as ours.
            user_provided_producer_name=self._config.producer_name is not None,
            producer_access_mode=self._config.access_mode,
            topic_epoch=self._topic_epoch,
        )
        reply = await with_deadline(self._clock, deadline, cnx.request(command).wait, "PRODUCER")
        assert isinstance(reply, c.ProducerSuccess)
        self.producer_name = reply.producer_name
        self._topic_epoch = reply.topic_epoch
        if self._next_seq is None:  # rule 1, first creation only
            self._next_seq = reply.last_sequence_id + 1
            self.last_sequence_id = reply.last_sequence_id
        self._max_message_size = cnx.max_message_size
        self._checksum = cnx.protocol_version >= CHECKSUM_MIN_PROTOCOL
        self._plain = PlainSends(
            self.producer_id, self.producer_name, self._max_message_size, self._checksum
        )
        for op in self._pending:  # rule 5
            cnx.write(op.frame)

    def _detach_connection(self, cnx: ClientConnection) -> None:
        cnx.remove_producer(self.producer_id)

    def _start_loops(self, tg: anyio.abc.TaskGroup) -> None:
        if self._batch is not None:
            tg.start_soon(self._batch_timer)
        if self._config.send_timeout > 0:
            tg.start_soon(self._send_timeout_loop)

    # ---- sending -------------------------------------------------------------------------------

    async def send(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        deliver_at: int | None = None,
        sequence_id: int | None = None,
    ) -> MessageId:
        """Send one message and wait for its receipt.

        Args:
            payload: the message bytes.
            key: the partition key (routes partitioned topics, Key_Shared).
            properties: string properties.
            event_time: application event time, ms since the epoch.
            deliver_at: delayed delivery time, ms since the epoch (never batched).
            sequence_id: an explicit sequence id instead of the next one.

        Returns:
            The message id (rule 3).

        Raises:
            ProducerClosedError: the producer is closed.
            MessageTooBigError: too large for the broker and chunking is off.
            OperationTimeoutError: no receipt within the send timeout.
        """
        future = await self.send_async(
            payload,
            key=key,
            properties=properties,
            event_time=event_time,
            deliver_at=deliver_at,
            sequence_id=sequence_id,
        )
        if self._batch is not None and not future.done():
            self._flush_batch()  # a lone awaited send should not wait for the batch delay
        return await future

    async def send_async(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        deliver_at: int | None = None,
        sequence_id: int | None = None,
        callback: SendCallback | None = None,
    ) -> Future[MessageId]:
        """Queue one message without waiting for its receipt (waits only for queue room).

        Arguments are those of `send`, plus `callback`, called with the future when it completes.

        Returns:
            A future of the message id; `await` it, or poll `done()` / `result()`.

        Raises:
            ProducerClosedError: the producer is closed.
            MessageTooBigError: too large for the broker and chunking is off.
        """
        if self._state in ENDED_STATES:
            self._check_usable()
        if self._pending_messages >= self._max_pending:
            await self._wait_for_room()
        next_seq = self._next_seq
        assert next_seq is not None  # set by the first attachment
        if sequence_id is None:
            sequence_id = next_seq
            self._next_seq = next_seq + 1
        elif sequence_id >= next_seq:
            self._next_seq = sequence_id + 1
        # The common message has no key, properties or times: the paths below take shortcuts.
        plain = key is None and not properties and event_time is None
        future: Future[MessageId]
        batch = self._batch
        size = len(payload)
        if batch is not None and deliver_at is None and size < self._max_message_size:
            # Flush first if this message would overflow the batch's byte budget (spec §8.1).
            if batch.count and batch.size + size > self._batch_max_bytes:
                self._flush_batch()
            if not batch.count:
                # Only the batch's first message sets its publish time and start (spec §8.1):
                # the clocks are read once per batch, not once per message.
                started = self._clock.now()
                batch.start(sequence_id, self._clock.wall_ms(), key, started)
                self._batch_due.set(started + self._batch_delay)
            if plain:
                future = batch.add_plain(payload, sequence_id)
            else:
                future = batch.add(payload, sequence_id, key, _key_values(properties), event_time)
            self._pending_messages += 1
            if batch.count >= self._batch_max_messages or batch.size >= self._batch_max_bytes:
                self._flush_batch()
        else:
            future = Future()
            publish_time = self._clock.wall_ms()
            plain = plain and deliver_at is None
            frame = self._plain.frame(sequence_id, publish_time, payload) if plain else None
            if frame is not None:
                self._push(PendingOp(sequence_id, sequence_id, frame, 1, self._deadline(), future))
            else:
                self._send_generic(
                    future,
                    payload,
                    sequence_id,
                    publish_time,
                    key,
                    properties,
                    event_time,
                    deliver_at,
                )
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def _send_generic(
        self,
        future: Future[MessageId],
        payload: bytes,
        sequence_id: int,
        publish_time: int,
        key: str | None,
        properties: Mapping[str, str] | None,
        event_time: int | None,
        deliver_at: int | None,
    ) -> None:
        """Send an unbatched message through the records: any metadata, chunking, range checks.

        Raises:
            MessageTooBigError: too large for the broker and chunking is off.
        """
        metadata = c.MessageMetadata(
            producer_name=self.producer_name,
            sequence_id=sequence_id,
            publish_time=publish_time,
            properties=_key_values(properties),
            partition_key=key,
            event_time=event_time,
            deliver_at_time=deliver_at,
        )
        send = c.Send(producer_id=self.producer_id, sequence_id=sequence_id)
        frame = build_single(send, metadata, payload, self._max_message_size, self._checksum)
        if frame is not None:
            self._push(PendingOp(sequence_id, sequence_id, frame, 1, self._deadline(), future))
            return
        if not self._config.chunking_enabled:
            raise MessageTooBigError(
                f"{len(payload)} bytes exceed the broker's max message size "
                f"{self._max_message_size} (enable chunking)"
            )
        # spec §8.4: one SEND per chunk; only the last chunk's receipt completes the future.
        chunk_ids: list[MessageId] = []
        frames = build_chunks(send, metadata, payload, self._max_message_size, self._checksum)
        last = len(frames) - 1
        for i, chunk in enumerate(frames):
            self._push(
                PendingOp(
                    sequence_id,
                    sequence_id,
                    chunk,
                    1 if i == last else 0,
                    self._deadline(),
                    future if i == last else None,
                    chunk_ids=chunk_ids,
                )
            )

    def _flush_batch(self) -> None:
        batch = self._batch
        if batch is None or not batch.count:
            return
        first_seq, frame, group, count = batch.build(
            self.producer_id, self.producer_name, self._checksum
        )
        self._pending_messages -= count  # _push counts them again, as one op
        last_seq = first_seq + count - 1
        self._push(PendingOp(first_seq, last_seq, frame, count, self._deadline(), batch=group))

    async def flush(self) -> None:
        """Send the open batch now and wait until everything sent so far has its receipt.

        Raises:
            ProducerClosedError: the producer is closed.
        """
        self._check_usable()
        self._flush_batch()
        if self._pending:
            last = self._pending[-1]  # a message's last chunk or a whole message or batch
            if last.batch is not None:
                await last.batch.wait_done()
            elif last.future is not None:
                await last.future.wait_done()

    # ---- timers --------------------------------------------------------------------------------

    async def _batch_timer(self) -> None:
        # The timer is left set when a batch is flushed early (full, or by `send`/`flush`): its
        # call then finds the batch empty, or a younger batch's start has moved it on.
        await self._batch_due.run()

    # ---- closing -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Flush, wait for outstanding receipts (up to the operation timeout), CLOSE_PRODUCER."""
        if self._state in (HandlerState.CLOSING, HandlerState.CLOSED):
            return
        if self._state is not HandlerState.FAILED:
            deadline = self._clock.now() + self._client.operation_timeout
            try:
                await with_deadline(self._clock, deadline, self.flush, "flush")
            except OperationTimeoutError:
                logger.warning(
                    "closing %s with %d unreceipted sends", self.topic, len(self._pending)
                )
        self._state = HandlerState.CLOSING
        await self._close_on_broker(
            lambda rid: c.CloseProducer(producer_id=self.producer_id, request_id=rid),
            "CLOSE_PRODUCER",
        )
        self._fail_pending(ProducerClosedError(f"producer on {self.topic} closed"))
        self._state = HandlerState.CLOSED
        await self._stop()
        self._client.forget(self)


def _key_values(properties: Mapping[str, str] | None) -> tuple[c.KeyValue, ...]:
    return tuple(c.KeyValue(key=k, value=v) for k, v in properties.items()) if properties else ()
