"""A producer's pending SENDs: the queue in send order, receipts, send errors, send timeouts.

Rules 2, 3, 4 and 6 of `producer` (spec §6.2, §6.3, §8.1): a receipt is matched to the head op;
message ids are made from it (a batch's per index, a chunked message's from its last chunk); the
queue's message count bounds `send_async`; an op whose deadline passes fails at the head.
`PendingSends` is the base class of `Producer`, which builds the ops and owns the state declared
here.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import anyio
import msgspec

from protocol import commands as c
from protocol.client._util import Future, FutureGroup  # PendingOp's fields, resolved at run time
from protocol.client.handler import Handler
from protocol.errors import (
    ChecksumError,
    OperationTimeoutError,
    ProducerClosedError,
    ServerError,
)
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.config import ReceiptListener

__all__ = ["PendingOp", "PendingSends"]

_NEVER = float("inf")


class PendingOp(msgspec.Struct):
    """One SEND in flight: its bytes and who to tell when its receipt comes.

    A Struct rather than a class with `__init__`: an unbatched producer makes one per message.
    """

    first_seq: int
    last_seq: int  # first_seq + batch size - 1
    frame: bytes
    messages: int  # what the pending bound counts (rule 4); 0 for all chunks but the last
    deadline: float
    future: Future[MessageId] | None = None  # an unbatched message's (its last chunk's)
    batch: FutureGroup[MessageId] | None = None  # a batch's messages' futures
    chunk_ids: list[MessageId] | None = None  # shared by the chunks of one message


class PendingSends(Handler):
    """The pending SENDs of a producer on one topic or partition (`Producer`)."""

    # The producer's state these read and write (set by `Producer.__init__`).
    partition: int
    last_sequence_id: int
    _pending: deque[PendingOp]
    _pending_messages: int
    _max_pending: int
    _send_timeout: float
    _room: anyio.Event | None
    _pending_armed: anyio.Event | None
    _listener: ReceiptListener | None

    def _flush_batch(self) -> None:
        """Send the open batch as one op now (the producer's)."""
        raise NotImplementedError

    async def _wait_for_room(self) -> None:  # rule 4
        while self._pending_messages >= self._max_pending:
            self._flush_batch()  # the open batch may hold what fills the queue: send it now
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()
            self._check_usable()

    def _deadline(self) -> float:
        timeout = self._send_timeout
        return self._clock.now() + timeout if timeout > 0 else _NEVER

    def _push(self, op: PendingOp) -> None:
        if not self._pending and self._pending_armed is not None:
            self._pending_armed.set()
        self._pending.append(op)
        self._pending_messages += op.messages
        cnx = self._attached()
        if cnx is not None:
            cnx.write(op.frame)  # otherwise rule 5: sent after the next attachment

    # ---- receipts ------------------------------------------------------------------------------

    def handle_receipt(self, receipt: c.SendReceipt) -> bool:
        """SEND_RECEIPT for this producer; False when the connection must be closed (spec §6.3)."""
        if not self._pending:
            return True  # its op expired
        op = self._pending[0]
        sequence_id = receipt.sequence_id
        if sequence_id > op.last_seq:
            return False  # rule 2
        if sequence_id < op.first_seq:
            return True  # stale
        self._pending.popleft()
        self.last_sequence_id = op.last_seq
        message_id = receipt.message_id
        if message_id is None:
            ledger_id = entry_id = -1
        else:
            ledger_id, entry_id = message_id.ledger_id, message_id.entry_id
        partition = self.partition
        future = op.future
        if op.batch is not None:
            size = op.messages
            # One write for the whole batch: each message's id is made when it is asked for.
            op.batch.set_result(lambda i: MessageId(ledger_id, entry_id, partition, i, size))
        elif op.chunk_ids is not None:
            op.chunk_ids.append(MessageId(ledger_id, entry_id, partition))
            if future is not None:  # the last chunk: the message's id is the last chunk's
                future.set_result(op.chunk_ids[-1])
        elif future is not None:
            future.set_result(MessageId(ledger_id, entry_id, partition))
        listener = self._listener
        if listener is not None and op.messages:  # a chunk tells only with the message's last
            listener(op.first_seq, op.last_seq, ledger_id, entry_id, 0 if op.batch else -1, None)
        self._released(op)
        return True

    def handle_send_error(self, error: c.SendError) -> bool:
        """SEND_ERROR for this producer; False when the connection must be closed (spec §6.3)."""
        if error.error != ServerError.ChecksumError:
            return False  # spec §6.3: the connection is closed
        if self._pending and self._pending[0].first_seq == error.sequence_id:
            op = self._pending.popleft()
            self._fail_op(op, ChecksumError(error.message))
        return True

    def _released(self, op: PendingOp) -> None:
        self._pending_messages -= op.messages
        if self._room is not None and self._pending_messages < self._max_pending:
            self._room.set()
            self._room = None

    def _fail_op(self, op: PendingOp, error: Exception) -> None:
        if op.batch is not None:
            op.batch.set_exception(error)
        elif op.future is not None:
            op.future.set_exception(error)
        if self._listener is not None and op.messages:
            self._listener(op.first_seq, op.last_seq, -1, -1, 0 if op.batch else -1, error)
        self._released(op)

    def _fail_pending(self, error: Exception) -> None:
        self._flush_batch()
        pending, self._pending = self._pending, deque()
        for op in pending:
            self._fail_op(op, error)

    def _on_failed(self, error: BaseException) -> None:
        self._fail_pending(error if isinstance(error, Exception) else ProducerClosedError())

    async def _send_timeout_loop(self) -> None:  # rule 6
        while True:
            if not self._pending:
                self._pending_armed = anyio.Event()
                await self._pending_armed.wait()
                continue
            await self._clock.sleep_until(self._pending[0].deadline)
            now = self._clock.now()
            while self._pending and self._pending[0].deadline <= now:
                op = self._pending.popleft()
                self._fail_op(op, OperationTimeoutError(f"send to {self.topic} timed out"))
