"""Slow, failing or hung storage on demand: the bookie stub's fault injection, for tests.

``cluster.storage.inject(latency=0.2)`` delays every ledger operation's reply by 200 ms,
``fail_next=3`` fails the next three (the broker sees BookKeeper's "not enough bookies"),
``stall=2.0`` holds every reply for two seconds (the bookies look hung). Latency and failures
touch only ledger operations (``storage_stub.faults.Op``: create, add, read ...), not the
metadata the brokers keep in the same stub in ``mode="processes"``, so locks and leadership
hold while storage misbehaves; a stall holds everything the stub answers, which in that mode
includes the brokers' metadata sessions (keep it shorter than
``metadataStoreSessionTimeoutMillis``). ``clear()`` ends it all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from storage_stub.faults import FaultConfig, Fixed, Op, OpFaults

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from anyio.from_thread import BlockingPortal

    from storage_stub.client import StubClient
    from storage_stub.messages import StatsReply

__all__ = ["LEDGER_OPS", "StorageFaults"]

LEDGER_OPS: Final = frozenset(
    {Op.CREATE, Op.ADD, Op.READ, Op.LAC, Op.CLOSE, Op.FENCE, Op.DELETE, Op.INFO}
)
"""The operations of the bookie stub proper (not its metadata service)."""


class StorageFaults:
    """Fault injection on a test cluster's bookie stub (``cluster.storage``)."""

    def __init__(self, portal: BlockingPortal, stub: StubClient, check: Callable[[], None]) -> None:
        self._portal = portal
        self._stub = stub
        self._check = check

    def inject(
        self,
        *,
        latency: float | None = None,
        fail_next: int | None = None,
        stall: float | None = None,
        ops: Iterable[Op | str] = LEDGER_OPS,
    ) -> None:
        """Make storage slow, failing or hung; what is not given is left as it is.

        Args:
            latency: Seconds added to every reply of ``ops`` from now on (``0``: none).
            fail_next: Fail the next this many requests of ``ops``.
            stall: Hold every reply for this many seconds from now.
            ops: The operation kinds affected (``storage_stub.faults.Op`` values).

        Raises:
            ValueError: A negative amount or an unknown operation.
        """
        self._check()
        kinds = sorted({Op(op) for op in ops})
        for name, amount in (("latency", latency), ("fail_next", fail_next), ("stall", stall)):
            if amount is not None and amount < 0:
                raise ValueError(f"{name} must be >= 0, got {amount}")
        if latency is not None:
            faults = OpFaults(latency=Fixed(latency * 1000.0)) if latency > 0 else OpFaults()
            config = FaultConfig(ops={op.value: faults for op in kinds})
            self._portal.call(self._stub.configure_faults, config)
        if fail_next is not None:
            self._portal.call(self._stub.fail_next, fail_next, [op.value for op in kinds])
        if stall is not None:
            self._portal.call(self._stub.stall, stall)

    def clear(self) -> None:
        """No more latency, failures or stall."""
        self._check()
        self._portal.call(self._stub.clear_faults)

    def statistics(self) -> StatsReply:
        """The stub's counters, fault decisions included (``faults``)."""
        self._check()
        return self._portal.call(self._stub.statistics)
