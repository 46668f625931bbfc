"""A metadata session on etcd: one lease, kept alive on the injected clock.

Pulsar's etcd store does the same (``EtcdMetadataStore``): the session is a lease whose TTL is
``metadataStoreSessionTimeoutMillis``; ephemeral nodes are keys attached to it, so etcd deletes
them (and tells every watcher) when the lease ends, whether it is revoked or expires.

Rules:

1. A new lease is granted with TTL = the session timeout in whole seconds (at least 1; etcd may
   raise it to its own minimum). The keep-alive loop renews it every third of the TTL.
2. The session is *lost* when etcd answers a keep-alive with TTL 0 (the lease expired, or
   someone revoked it), when etcd refuses a write for an unknown lease, or when no keep-alive
   succeeded for a whole TTL (the lease may still exist, but we can no longer prove it: the
   same rule ZooKeeper clients apply). A lost session is never used again: the next operation
   gets a new lease (``current``), first revoking the old one if etcd may still hold it, so
   that its ephemeral nodes end now rather than at its expiry. Watchers, this store's
   included, see those nodes deleted, which is how a broker learns it lost its locks; this
   matches the other backends, which open a new session on the next operation too.
3. Closing the session revokes the lease.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Final, NoReturn

import anyio
import msgspec

from emubroker.metadata.etcd_gateway import GatewayCallError, GatewayError, GatewayTimeoutError
from emubroker.metadata.etcd_messages import (
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
)

if TYPE_CHECKING:
    from emubroker.metadata.etcd_gateway import EtcdGateway
    from protocol.clock import Clock

__all__ = ["EtcdSession", "EtcdSessionStatistics"]

logger = logging.getLogger(__name__)

# Keep-alives per TTL (rule 1): two may fail and the lease still lives.
KEEPALIVES_PER_TTL: Final = 3
_NO_LEASE: Final = 0
# gRPC's NOT_FOUND: what etcd answers for a lease it does not know (ErrGRPCLeaseNotFound).
GRPC_NOT_FOUND: Final = 5


class EtcdSessionStatistics(msgspec.Struct, frozen=True):
    """Snapshot of a session, for debugging and tests.

    Attributes:
        lease_id: The current lease (0 before the first, or after the session was lost).
        leases_granted: Leases granted so far (one per session).
        keepalives: Keep-alives etcd answered.
        sessions_lost: Sessions that ended other than by ``end`` or ``expire``.
    """

    lease_id: int
    leases_granted: int
    keepalives: int
    sessions_lost: int


class EtcdSession:
    """The lease behind one metadata store; run :meth:`run_keepalive` in a task group.

    Args:
        gateway: Where etcd is.
        clock: Time for keep-alives and the lease's local deadline.
        session_timeout: Seconds without keep-alive before etcd ends the session.
    """

    def __init__(self, gateway: EtcdGateway, clock: Clock, session_timeout: float) -> None:
        if not session_timeout > 0:
            raise ValueError(f"session_timeout must be > 0, got {session_timeout}")
        self._gateway = gateway
        self._clock = clock
        self.ttl = max(1, math.ceil(session_timeout))
        self._lease = _NO_LEASE
        self._stale_lease = _NO_LEASE  # lost while etcd may still hold it (rule 2)
        self._deadline = math.inf  # when the lease ends unless renewed, as far as we know
        self._next_keepalive = math.inf
        self._wakeup: anyio.CancelScope | None = None
        self._granted = 0
        self._keepalives = 0
        self._lost = 0

    @property
    def lease_id(self) -> int:
        """The current lease, ``0`` if there is none (never granted, lost, or ended)."""
        return self._lease

    def statistics(self) -> EtcdSessionStatistics:
        """A frozen snapshot of the session's counters."""
        return EtcdSessionStatistics(self._lease, self._granted, self._keepalives, self._lost)

    async def current(self) -> int:
        """The live lease; grants a new one if the session was lost (rule 2).

        Raises:
            GatewayError: etcd could not be reached or refused.
        """
        if self._lease != _NO_LEASE:
            return self._lease
        if self._stale_lease != _NO_LEASE:
            await self._revoke(self._stale_lease)
            self._stale_lease = _NO_LEASE
        reply = await self._gateway.call(
            "/v3/lease/grant", LeaseGrantRequest(self.ttl), LeaseGrantResponse
        )
        if reply.error:
            raise GatewayError(f"etcd granted no lease: {reply.error}")
        self._lease = reply.lease_id
        self._granted += 1
        self._renewed(reply.ttl)
        return self._lease

    def lost(self, lease_id: int, reason: str, *, maybe_alive: bool = False) -> None:
        """Count the session of ``lease_id`` as ended (rule 2); other leases are ignored."""
        if lease_id == _NO_LEASE or lease_id != self._lease:
            return
        logger.warning("etcd metadata session (lease %x) lost: %s", lease_id, reason)
        self._lease = _NO_LEASE
        self._lost += 1
        if maybe_alive:
            self._stale_lease = lease_id
        self._next_keepalive = self._deadline = math.inf

    async def expire(self) -> None:
        """End the session now, as an expiry would, and start a new one.

        Raises:
            GatewayError: etcd could not be reached or refused.
        """
        lease = await self.current()
        await self._revoke(lease, quietly=False)
        self._lease = _NO_LEASE
        await self.current()

    async def end(self) -> None:
        """Revoke the lease (rule 3); a failure is logged, and etcd expires it later instead."""
        lease, self._lease = self._lease, _NO_LEASE
        self._next_keepalive = self._deadline = math.inf
        for stale in (lease, self._stale_lease):
            if stale != _NO_LEASE:
                await self._revoke(stale)

    async def run_keepalive(self) -> NoReturn:
        """Renew the lease every third of its TTL; never returns."""
        while True:
            with anyio.CancelScope() as self._wakeup:
                if math.isinf(self._next_keepalive):
                    await anyio.sleep_forever()
                await self._clock.sleep_until(self._next_keepalive)
            self._wakeup = None
            lease = self._lease
            if lease == _NO_LEASE or self._clock.now() < self._next_keepalive:
                continue
            try:
                # One that takes longer than the interval is as good as lost.
                with self._gateway.watchdog.limit(self.ttl / KEEPALIVES_PER_TTL) as limit:
                    reply = await self._keepalive(lease)
                if limit.cancelled_caught:
                    raise GatewayTimeoutError("no keep-alive reply", maybe_applied=True)
            except GatewayError as exc:
                logger.info("keep-alive of etcd lease %x failed (will retry): %s", lease, exc)
                if self._clock.now() >= self._deadline:
                    self.lost(lease, "no keep-alive succeeded for a whole TTL", maybe_alive=True)
                else:
                    self._next_keepalive = self._clock.now() + self.ttl / (2 * KEEPALIVES_PER_TTL)
                continue
            if lease != self._lease:
                continue  # ended or replaced while we waited
            if reply.ttl <= 0:
                self.lost(lease, "etcd ended the lease (expired or revoked)")
            else:
                self._keepalives += 1
                self._renewed(reply.ttl)

    async def _keepalive(self, lease: int) -> LeaseKeepAliveResponse:
        # etcd has no unary keep-alive: it is a stream, of which one request/reply is enough.
        request = LeaseKeepAliveRequest(lease)
        async with self._gateway.open_stream(
            "/v3/lease/keepalive", request, LeaseKeepAliveResponse
        ) as replies:
            async for reply in replies:
                return reply
        raise GatewayError("etcd ended the keep-alive stream without a reply")

    def _renewed(self, ttl: int) -> None:
        now = self._clock.now()
        self._deadline = now + ttl
        self._next_keepalive = now + self.ttl / KEEPALIVES_PER_TTL
        if self._wakeup is not None:
            self._wakeup.cancel()  # the loop may be sleeping forever, or until a later time

    async def _revoke(self, lease: int, *, quietly: bool = True) -> None:
        try:
            await self._gateway.call(
                "/v3/lease/revoke", LeaseRevokeRequest(lease), LeaseRevokeResponse
            )
        except GatewayCallError as exc:
            if exc.code == GRPC_NOT_FOUND:
                return  # already gone: expired, or revoked by someone else
            if not quietly:
                raise
            logger.warning("could not revoke etcd lease %x (it expires by itself): %s", lease, exc)
        except GatewayError as exc:
            if not quietly:
                raise
            logger.warning("could not revoke etcd lease %x (it expires by itself): %s", lease, exc)
