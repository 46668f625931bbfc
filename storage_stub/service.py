"""The stub's request executor: one request in, one reply (and maybe a delay) out.

:class:`StubService` owns the ledger store, the metadata tree and the fault injector, and is
shared by every connection of one stub. :meth:`StubService.execute` is synchronous: requests
are applied in the order they arrive (so pipelined adds get entry ids in send order), and the
connection decides when the reply may leave:

1. After the stores' journals hold the mutation (``ledgers.ticket`` / ``metadata.ticket``,
   awaited with ``wait_durable``): nothing is acknowledged before it is durable.
2. Not before the fault injector's ``ready_at``. Replies to adds of one ledger never overtake
   each other (BookKeeper acknowledges a ledger's adds in entry order), so an add's
   ``ready_at`` is at least the previous add's.
3. Watch notifications are queued (``_outgoing``) with the metadata ticket of the write that
   caused them and only pushed (:meth:`publish`) once that ticket is durable, before the replies
   of the same batch, so a client sees a write's notification no later than its reply.

The session reaper and the journal compactor are the service's background tasks
(:meth:`run_background`).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from protocol.rpc import MAX_RPC_FRAME_SIZE
from storage_stub import messages as m
from storage_stub.errors import ReadTooLargeError
from storage_stub.faults import FaultInjector, Op
from storage_stub.ledger import StorageError
from storage_stub.metadata import InvalidArgumentError, MetadataError, WatchDrain

if TYPE_CHECKING:
    from protocol.clock import Clock
    from storage_stub.durable import DurableLedgerStore
    from storage_stub.durable_metadata import DurableMetadataTree

__all__ = ["StubService", "WatchSink"]

logger = logging.getLogger(__name__)

_OPS: Final[dict[type, Op]] = {
    m.AddEntry: Op.ADD,
    m.ReadEntries: Op.READ,
    m.CreateLedger: Op.CREATE,
    m.GetLastAddConfirmed: Op.LAC,
    m.CloseLedger: Op.CLOSE,
    m.FenceLedger: Op.FENCE,
    m.DeleteLedger: Op.DELETE,
    m.GetLedgerInfo: Op.INFO,
    m.ListLedgers: Op.INFO,
    m.SessionCreate: Op.SESSION,
    m.SessionHeartbeat: Op.SESSION,
    m.SessionClose: Op.SESSION,
    m.MetaGet: Op.META_READ,
    m.MetaChildren: Op.META_READ,
    m.MetaExists: Op.META_READ,
    m.WatchCreate: Op.META_READ,
    m.WatchClose: Op.META_READ,
    m.MetaPut: Op.META_WRITE,
    m.MetaDelete: Op.META_WRITE,
}
# A read reply must fit in one RPC frame (the client rejects bigger ones and drops the
# connection); leave room for the per-entry msgpack headers and the reply's own fields.
MAX_READ_BYTES: Final = MAX_RPC_FRAME_SIZE - 1024 * 1024
_METADATA_WRITES: Final = (m.MetaPut, m.MetaDelete, m.SessionCreate, m.SessionClose)


class WatchSink(Protocol):
    """A connection, as far as watches go.

    Attributes:
        watches: The connection's watches: its own watch id -> the tree's watch id.
    """

    watches: dict[int, int]

    def push(self, message: m.WatchEvent | m.WatchEnded) -> None: ...


class StubService:
    """Executes requests against the stores; shared by all connections of one stub.

    Args:
        ledgers: The ledger store.
        metadata: The metadata tree.
        clock: Time for latency, stalls and session expiry.
        faults: The fault injector (a fresh one injects nothing).
    """

    def __init__(
        self,
        ledgers: DurableLedgerStore,
        metadata: DurableMetadataTree,
        *,
        clock: Clock,
        faults: FaultInjector | None = None,
    ) -> None:
        self.ledgers = ledgers
        self.metadata = metadata
        self.clock = clock
        self.faults = faults if faults is not None else FaultInjector()
        self._last_add_ready: dict[int, float] = {}
        self._watch_sinks: dict[int, tuple[WatchSink, int]] = {}  # tree id -> (conn, its id)
        self._outgoing: list[tuple[int, list[WatchDrain]]] = []
        self._connections = 0
        # Tells clients apart stub runs whose session ids may overlap (see HelloReply).
        self.incarnation = random.SystemRandom().getrandbits(62)
        self._reaper_scope: anyio.CancelScope | None = None
        self._compactor_wakeup = anyio.Event()

    # ---- execution ------------------------------------------------------------------------

    def execute(self, request: m.Request, sink: WatchSink) -> tuple[m.Reply, float | None]:
        """Apply one request.

        Args:
            request: The decoded request.
            sink: The connection the request came on (it receives pushes of watches it opens).

        Returns:
            The reply, and the clock time it must wait for (``None``: no fault delay).
        """
        op = _OPS.get(type(request))
        ready_at: float | None = None
        if op is not None and self.faults.active:  # reading the clock costs; skip when idle
            decision = self.faults.decide(op, self.clock.now())
            if decision is not None:
                ready_at = decision.ready_at
                if isinstance(request, m.AddEntry):
                    ledger_id = request.ledger_id
                    ready_at = max(ready_at, self._last_add_ready.get(ledger_id, ready_at))
                    self._last_add_ready[ledger_id] = ready_at
                if decision.error is not None:
                    return m.ErrorReply(request.rid, decision.error, "injected fault"), ready_at
        try:
            reply = self._apply(request, sink)
        except StorageError as exc:
            reply = m.ErrorReply(request.rid, exc.code, str(exc), exc.ledger_id)
        except MetadataError as exc:
            reply = m.ErrorReply(request.rid, exc.code, str(exc))
        if isinstance(request, _METADATA_WRITES):
            self._collect_notifications()
            if self.metadata.should_compact():
                self._compactor_wakeup.set()
        return reply, ready_at

    def _apply(self, request: m.Request, sink: WatchSink) -> m.Reply:
        ledgers, meta, rid = self.ledgers, self.metadata, request.rid
        match request:
            case m.AddEntry(_, ledger_id, data):
                return m.IntReply(rid, ledgers.add_entry(ledger_id, data))
            case m.ReadEntries(_, ledger_id, first, last):
                entries = ledgers.read(ledger_id, first, last)
                # One entry always fits: it arrived in a frame of the same limit.
                if len(entries) > 1 and sum(map(len, entries)) > MAX_READ_BYTES:
                    raise ReadTooLargeError(
                        f"entries {first}..{last} of ledger {ledger_id} exceed "
                        f"{MAX_READ_BYTES} bytes; read fewer at a time",
                        ledger_id=ledger_id,
                    )
                return m.EntriesReply(rid, entries)
            case m.CreateLedger():
                return m.IntReply(rid, ledgers.create_ledger())
            case m.GetLastAddConfirmed(_, ledger_id):
                return m.IntReply(rid, ledgers.last_add_confirmed(ledger_id))
            case m.CloseLedger(_, ledger_id):
                return m.IntReply(rid, ledgers.close(ledger_id))
            case m.FenceLedger(_, ledger_id):
                return m.IntReply(rid, ledgers.fence(ledger_id))
            case m.DeleteLedger(_, ledger_id):
                ledgers.delete(ledger_id)
                self._last_add_ready.pop(ledger_id, None)
                if ledgers.should_compact():
                    self._compactor_wakeup.set()
                return m.Ok(rid)
            case m.GetLedgerInfo(_, ledger_id):
                return m.LedgerInfoReply(rid, ledgers.info(ledger_id))
            case m.ListLedgers():
                return m.IdsReply(rid, ledgers.ledger_ids())
            case m.MetaGet(_, session, path):
                stat = meta.get(path, session)
                if stat is None:
                    return m.NodeReply(rid, None)
                return m.NodeReply(
                    rid, stat.value, stat.version, stat.ephemeral, stat.created_by_self
                )
            case m.MetaPut(_, session, path, value, expected, ephemeral, sequential):
                put_path, version = meta.put(
                    session, path, value, expected, ephemeral=ephemeral, sequential=sequential
                )
                return m.PutReply(rid, put_path, version)
            case m.MetaDelete(_, path, expected):
                meta.delete(path, expected)
                return m.Ok(rid)
            case m.MetaChildren(_, path):
                return m.NamesReply(rid, meta.tree.children(path))
            case m.MetaExists(_, path):
                return m.BoolReply(rid, meta.tree.exists(path))
            case m.SessionCreate(_, timeout_ms):
                session = meta.create_session(self.clock.now(), timeout_ms / 1000.0)
                if self._reaper_scope is not None:
                    self._reaper_scope.cancel()  # the new deadline may be the earliest
                return m.IntReply(rid, session)
            case m.SessionHeartbeat(_, session):
                meta.heartbeat(session, self.clock.now())
                return m.Ok(rid)
            case m.SessionClose(_, session):
                meta.close_session(session)
                return m.Ok(rid)
            case m.WatchCreate(_, watch_id, prefix):
                if watch_id in sink.watches:
                    raise InvalidArgumentError(f"watch id {watch_id} is already in use")
                tree_id = meta.tree.watch(prefix)
                sink.watches[watch_id] = tree_id
                self._watch_sinks[tree_id] = (sink, watch_id)
                return m.Ok(rid)
            case m.WatchClose(_, watch_id):
                closed = sink.watches.pop(watch_id, None)
                if closed is not None:
                    self._unwatch(closed)
                return m.Ok(rid)
            case m.Hello():
                return m.HelloReply(rid, self.incarnation)
            case _:
                return self._control(request)

    def _control(self, request: m.Request) -> m.Reply:
        now = self.clock.now()
        match request:
            case m.ConfigureFaults(rid, config):
                self.faults.configure(config)
            case m.FailNext(rid, count, ops, code):
                try:
                    kinds = None if ops is None else frozenset(Op(op) for op in ops)
                    self.faults.fail_next(count, kinds, code)
                except ValueError as exc:
                    return m.ErrorReply(rid, "InvalidArgument", str(exc))
            case m.Stall(rid, seconds):
                self.faults.stall(now + seconds)
            case m.ClearFaults(rid):
                self.faults.clear()
            case m.GetStatistics(rid):
                tree = self.metadata.tree.statistics()
                return m.StatsReply(
                    rid,
                    self.ledgers.statistics(),
                    self.faults.statistics(now),
                    self._connections,
                    tree.sessions,
                    tree.nodes,
                )
            case m.Ping(rid):
                pass
            case _:  # pragma: no cover - the union is closed
                return m.ErrorReply(request.rid, "StorageError", f"unknown request {request!r}")
        return m.Ok(rid)

    # ---- watches ------------------------------------------------------------------------------

    def _collect_notifications(self) -> None:
        drained = self.metadata.tree.drain()
        if drained:
            self._outgoing.append((self.metadata.ticket, drained))

    def publish(self) -> None:
        """Push every queued notification whose write is durable (rule 3)."""
        if not self._outgoing:
            return
        durable = self.metadata.durable_ticket
        ready = 0
        for ticket, drained in self._outgoing:
            if ticket > durable:
                break
            ready += 1
            for drain in drained:
                target = self._watch_sinks.get(drain.watch_id)
                if target is None:
                    continue  # closed meanwhile
                sink, watch_id = target
                for note in drain.notifications:
                    sink.push(m.WatchEvent(watch_id, note.path, note.kind))
                if drain.overflowed:
                    del self._watch_sinks[drain.watch_id]
                    sink.watches.pop(watch_id, None)
                    sink.push(m.WatchEnded(watch_id, overflowed=True))
        del self._outgoing[:ready]

    def _unwatch(self, tree_id: int) -> None:
        self.metadata.tree.unwatch(tree_id)
        self._watch_sinks.pop(tree_id, None)

    def connection_opened(self) -> None:
        self._connections += 1

    def connection_closed(self, sink: WatchSink) -> None:
        """Forget a connection that went away, with its watches."""
        self._connections -= 1
        for tree_id in sink.watches.values():
            self._unwatch(tree_id)
        sink.watches.clear()

    async def wait_durable(self, ledger_ticket: int, metadata_ticket: int) -> None:
        """Wait for both journals to hold everything up to the tickets; then publish.

        Raises:
            PersistenceFailedError: A journal failed.
        """
        await self.ledgers.wait_durable(ledger_ticket)
        await self.metadata.wait_durable(metadata_ticket)
        self.publish()

    # ---- background tasks ----------------------------------------------------------------------

    async def run_background(self) -> None:
        """Run the session reaper and the compactor; never returns."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reap_sessions)
            tg.start_soon(self._compact)

    async def _reap_sessions(self) -> None:
        # Sleeps until the earliest session deadline; a new session (maybe with a shorter
        # timeout) cancels the sleep to recompute. Heartbeats only move deadlines later.
        while True:
            deadline = self.metadata.tree.next_expiry()
            with anyio.CancelScope() as scope:
                self._reaper_scope = scope
                if deadline is None:
                    await anyio.sleep_forever()
                else:
                    await self.clock.sleep_until(deadline)
            self._reaper_scope = None
            try:
                expired = self.metadata.expire_sessions(self.clock.now())
            except StorageError:
                logger.exception("cannot journal session expiry")
                await anyio.sleep_forever()  # the journal is gone; nothing more can expire
            if expired:
                logger.info("metadata sessions expired: %s", expired)
                self._collect_notifications()
                try:
                    await self.wait_durable(0, self.metadata.ticket)
                except StorageError:
                    logger.exception("journal failed while expiring sessions")

    async def _compact(self) -> None:
        while True:
            await self._compactor_wakeup.wait()
            self._compactor_wakeup = anyio.Event()
            for store in (self.ledgers, self.metadata):
                if store.should_compact():
                    try:
                        await store.compact()
                    except StorageError:
                        logger.exception("journal compaction failed")
