"""Leader election among a cluster's brokers, as Pulsar's ``LeaderElectionService`` runs it.

spec/pulsar-behaviour.md §6.2; Pulsar's ``LeaderElectionImpl`` (pulsar-metadata) is the model:

- The leader holds the **ephemeral** node ``/loadbalance/leader`` whose value is Pulsar's
  ``LeaderBroker`` JSON ``{"brokerId": "host:webServicePort", "serviceUrl": "http://..."}``.
- An election reads the node. Missing: create it with ``expected_version=-1`` (first creator
  wins; a broker that loses the race reads again and follows). Present with another broker's
  value: follow. Present with *our* value: leading if our current session created it, else it is
  a leftover of our previous session (a restart on the same ports before the old session
  expired) and is deleted, version-checked, before electing again. A value of ours with a
  different content in our own session is deleted the same way.
- Everyone watches the node. When it is deleted (the leader's session ended: its process died,
  or it stopped heartbeating past ``metadataStoreSessionTimeoutMillis``, or it shut down) every
  broker runs the election again. A failed election is retried after 5 s
  (``LEADER_ELECTION_RETRY_DELAY_SECONDS``).
- Created and modified notifications only refresh the known leader (Pulsar's metadata cache).
- A broker shutting down while leading deletes the node first, so a follower takes over at once
  instead of after the session timeout.

The watch is opened *before* each election, so a deletion between the read and the watch
cannot be missed (Pulsar re-registers its ZooKeeper watch with a ``get`` for the same reason).
A broken watch (``WatchOverflowError``: notifications were lost) is reopened and the election
run again, which re-reads the node.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from typing import TYPE_CHECKING, Final

import anyio
import msgspec

from emubroker.metadata import (
    BadVersionError,
    MetadataStoreError,
    NotFoundError,
    NotificationKind,
    StoreClosedError,
    WatchOverflowError,
)
from emubroker.metadata.paths import LEADER_PATH

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskStatus

    from emubroker.metadata import MetadataStore, Notification, VersionedValue
    from protocol.clock import Clock

__all__ = [
    "RETRY_DELAY",
    "LeaderBroker",
    "LeaderElectionService",
    "LeaderElectionState",
    "LeaderElectionStatistics",
]

log = logging.getLogger(__name__)

"""Pulsar's ``LeaderElectionService.ELECTION_ROOT``."""

RETRY_DELAY: Final = 5.0
"""Seconds before a failed election is tried again (``LEADER_ELECTION_RETRY_DELAY_SECONDS``)."""

# Racing creators only make an election read again, and each round has a winner; this many
# rounds in a row without an answer means the node is being rewritten in a loop.
_MAX_ROUNDS: Final = 16
# Releasing the node on shutdown must not hang a stopping broker on a dead store; the session's
# end removes the node anyway.
_RELEASE_TIMEOUT: Final = 2.0


class LeaderElectionState(enum.Enum):
    """Pulsar's ``LeaderElectionState``."""

    NO_LEADER = "NoLeader"
    LEADING = "Leading"
    FOLLOWING = "Following"


class LeaderBroker(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Pulsar's ``LeaderBroker``: the value of the leader node.

    Attributes:
        broker_id: ``host:webServicePort``. Pulsar before 3.2 wrote only ``serviceUrl``; its
            ``getBrokerId()`` then falls back to the URL's authority, as :attr:`id` does.
        service_url: The leader's web service URL (``http://host:port``).
    """

    broker_id: str | None = None
    service_url: str = ""

    @property
    def id(self) -> str:
        """The broker id, falling back to ``serviceUrl`` without its scheme."""
        if self.broker_id is not None:
            return self.broker_id
        scheme, sep, rest = self.service_url.partition("://")
        return rest if sep else scheme

    def same_broker(self, other: LeaderBroker) -> bool:
        """Pulsar's ``equals`` (Lombok, through the getters): same id and service URL."""
        return self.id == other.id and self.service_url == other.service_url


class LeaderElectionStatistics(msgspec.Struct, frozen=True):
    """A snapshot of one broker's view of the election.

    Attributes:
        state: This broker's state.
        leader: The leader it knows of, if any.
        leader_changes: How many times the known leader became a different broker (the first
            leader this broker learnt of counts as one).
    """

    state: LeaderElectionState
    leader: LeaderBroker | None
    leader_changes: int


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(LeaderBroker)


class LeaderElectionService:
    """One broker's part in the election; run :meth:`run` in a task group.

    Args:
        store: The broker's metadata session; the leader node is ephemeral in it.
        clock: Times the retry after a failed election.
        broker_id: This broker's id, ``host:webServicePort``.
        service_url: This broker's web service URL.
        path: The election node (tests may run several elections in one store).
        retry_delay: Seconds before a failed election is retried.
        announce: The logging level of who leads and of this broker's state changes: INFO
            where the cluster has several brokers, DEBUG for a broker alone (standalone),
            which leads by definition.
    """

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        *,
        broker_id: str,
        service_url: str,
        path: str = LEADER_PATH,
        retry_delay: float = RETRY_DELAY,
        announce: int = logging.INFO,
    ) -> None:
        self._store = store
        self._announce = announce
        self._clock = clock
        self._path = path
        self._retry_delay = retry_delay
        self.proposed = LeaderBroker(broker_id=broker_id, service_url=service_url)
        self._payload = _ENCODER.encode(self.proposed)
        self._state = LeaderElectionState.NO_LEADER
        self._reported = LeaderElectionState.NO_LEADER  # the state listeners last heard of
        self._leader: LeaderBroker | None = None
        self._version: int | None = None  # of the node we created, while leading
        self._changes = 0
        self._listeners: list[Callable[[LeaderElectionState], None]] = []

    # ---- what the rest of the broker reads -------------------------------------------------

    @property
    def state(self) -> LeaderElectionState:
        return self._state

    def is_leader(self) -> bool:
        """Whether this broker leads (Pulsar's ``isLeader()``)."""
        return self._state is LeaderElectionState.LEADING

    def current_leader(self) -> LeaderBroker | None:
        """The leader as last read (Pulsar's ``getCurrentLeader()``), or None."""
        return self._leader

    def subscribe(self, listener: Callable[[LeaderElectionState], None]) -> Callable[[], None]:
        """Call ``listener(state)`` whenever this broker's state changes; returns the unsubscriber.

        The leader's periodic tasks start on ``LEADING`` and stop on anything else, as Pulsar's
        ``PulsarService`` listener does.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def statistics(self) -> LeaderElectionStatistics:
        return LeaderElectionStatistics(self._state, self._leader, self._changes)

    # ---- the service -----------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Take part in the election until cancelled; releases the leadership on the way out.

        ``task_status.started()`` is called once the first election has an answer, as Pulsar's
        ``start()`` joins its first ``elect()``. A store closed under the service ends it.

        Raises:
            MetadataStoreError: The first election failed (the broker cannot start).
        """
        started = False
        try:
            while True:
                try:
                    async with self._store.watch(self._path) as notifications:
                        await self._elect()
                        if not started:
                            task_status.started()
                            started = True
                        async for notification in notifications:
                            await self._on_notification(notification)
                    return  # the stream ends when the store is closed
                except WatchOverflowError:
                    log.warning("leader election: notifications were lost; electing again")
                except StoreClosedError:
                    if not started:
                        raise
                    return
                except MetadataStoreError as exc:
                    if not started:
                        raise
                    log.warning(
                        "leader election on %s failed (%s); retrying in %s s",
                        self._path,
                        exc,
                        self._retry_delay,
                    )
                    self._change_state(LeaderElectionState.NO_LEADER)
                    await self._clock.sleep(self._retry_delay)
        finally:
            await self._release()

    async def _on_notification(self, notification: Notification) -> None:
        if notification.path != self._path:
            return
        if notification.kind is NotificationKind.DELETED:
            # A deletion may be old news: an election that replaced a stale node deletes and
            # creates it, and hears both afterwards. Only a node that is gone ends our view.
            if await self._store.get(self._path) is None:
                if self._state is LeaderElectionState.LEADING:
                    log.warning("leadership released for %s", self._path)
                # Listeners are not told yet: the election that follows reports the state it
                # ends in, and a leader that wins again keeps its tasks running.
                self._state = LeaderElectionState.NO_LEADER
                self._version = None
                self._learn(None)
            await self._elect()
        else:
            node = await self._store.get(self._path)
            if node is not None:
                self._learn(self._decode(node))

    async def _elect(self) -> None:
        for _ in range(_MAX_ROUNDS):
            node = await self._store.get(self._path)
            if node is None:
                try:
                    put = await self._store.put(
                        self._path, self._payload, expected_version=-1, ephemeral=True
                    )
                except BadVersionError:
                    log.info("another broker became leader at the same time; reading it")
                    continue
                self._version = put.version
                self._learn(self.proposed)
                self._change_state(LeaderElectionState.LEADING)
                return
            existing = self._decode(node)
            if existing.same_broker(self.proposed) and node.created_by_self:
                self._version = node.version
                self._learn(existing)
                self._change_state(LeaderElectionState.LEADING)
                return
            if existing.same_broker(self.proposed) or node.created_by_self:
                # Ours from a previous session (it may be about to expire), or not ours although
                # our session wrote it: delete, version-checked, and elect again.
                log.info("deleting the leader node %s left by an earlier session", existing)
                await self._delete(node)
                continue
            self._learn(existing)
            self._change_state(LeaderElectionState.FOLLOWING)
            return
        raise MetadataStoreError(f"{self._path} keeps changing; no election result")

    async def _delete(self, node: VersionedValue) -> None:
        # Somebody else may have changed it first: the next round reads what is there.
        with contextlib.suppress(NotFoundError, BadVersionError):
            await self._store.delete(self._path, expected_version=node.version)

    def _decode(self, node: VersionedValue) -> LeaderBroker:
        try:
            return _DECODER.decode(node.value)
        except msgspec.DecodeError as exc:
            raise MetadataStoreError(f"{self._path} does not hold a LeaderBroker: {exc}") from exc

    def _learn(self, leader: LeaderBroker | None) -> None:
        if leader is not None and (self._leader is None or not self._leader.same_broker(leader)):
            self._changes += 1
            log.log(self._announce, "leader broker is now %s (%s)", leader.id, leader.service_url)
        self._leader = leader

    def _change_state(self, state: LeaderElectionState) -> None:
        if state is not self._state:
            self._state = state
            if state is LeaderElectionState.LEADING:
                log.log(self._announce, "this broker %s was elected leader", self.proposed.id)
            elif state is LeaderElectionState.FOLLOWING and self._leader is not None:
                log.log(
                    self._announce, "this broker %s follows %s", self.proposed.id, self._leader.id
                )
            else:
                log.log(self._announce, "this broker %s knows no leader", self.proposed.id)
        if state is self._reported:
            return
        self._reported = state
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("leader election listener failed")

    async def _release(self) -> None:
        version, self._version = self._version, None
        was_leading = self._state is LeaderElectionState.LEADING
        self._state = LeaderElectionState.NO_LEADER
        if not was_leading or version is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT):
            try:
                await self._store.delete(self._path, expected_version=version)
                log.log(self._announce, "released the leadership on %s", self._path)
            except (NotFoundError, BadVersionError, StoreClosedError):
                pass  # already gone (session ended) or no longer ours
            except MetadataStoreError as exc:
                log.warning("could not release %s (%s); it goes with the session", self._path, exc)
