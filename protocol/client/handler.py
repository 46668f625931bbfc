"""What producers and consumers share: attaching to a broker and reattaching after a loss.

Rules (spec §4.3 "Retries", §9):

1. A handler is *attached* when it is registered on a connection and the broker accepted its
   PRODUCER / SUBSCRIBE. `_cnx` is set before the request goes out, so a CLOSE_* or a dropped
   connection that races with the reply is never missed.
2. Losing the attachment (CLOSE_PRODUCER / CLOSE_CONSUMER, or the connection ending) detaches the
   handler and sets `_disconnected`; the background loop then waits for the backoff delay
   (100 ms doubling to 60 s, on the Clock), does a fresh LOOKUP and attaches again.
3. The first attachment retries retriable failures until the operation timeout, then raises;
   later ones retry retriable failures forever. A non-retriable `BrokerError` after creation moves
   the handler to FAILED for good (e.g. `ProducerFencedError`). Retry policy reads
   `BrokerError.retriable`, never the message text.
4. Requests a handler makes once attached (SEEK, GET_LAST_MESSAGE_ID, ...) survive a broken
   connection: they wait for the next attachment and are sent again, until the operation timeout.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from protocol import commands as c
from protocol.client._util import wait_until, with_deadline
from protocol.errors import (
    BrokerError,
    ClientClosedError,
    ConnectionBrokenError,
    OperationTimeoutError,
    ProtocolError,
)

if TYPE_CHECKING:
    from protocol.client.connection import ClientConnection
    from protocol.client.host import HandlerHost

__all__ = ["ENDED_STATES", "Handler", "HandlerState"]

logger = logging.getLogger(__name__)


class HandlerState(enum.Enum):
    """Where a producer or consumer is in its life (the module docstring's rules)."""

    CONNECTING = "connecting"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


_ENDED = (HandlerState.CLOSING, HandlerState.CLOSED, HandlerState.FAILED)
ENDED_STATES = _ENDED  # a tuple: enum members compare by identity, hashing them is slower
"""States in which `Handler._check_usable` raises: hot paths test this before calling it."""

# Failures after which attaching is simply tried again (rule 3).
_TRANSIENT = (ConnectionBrokenError, OperationTimeoutError, ProtocolError)


class Handler:
    """Base of `Producer` and `Consumer`: one topic (or partition) attached to one broker.

    Subclasses implement `_attach` (register, send PRODUCER/SUBSCRIBE, wait for the reply, post
    the follow-ups such as FLOW or re-sends), `_detach_connection`, `_on_detached` and
    `_closed_error`, and may add background loops in `_start_loops`.
    """

    def __init__(self, client: HandlerHost, topic: str) -> None:
        self._client = client
        self._clock = client.clock
        self.topic = topic
        self._state = HandlerState.CONNECTING
        self._cnx: ClientConnection | None = None
        self._connected = anyio.Event()
        self._disconnected = anyio.Event()
        self._scope = anyio.CancelScope()
        self._reconnect_delays = client.backoff.delays()
        self._failure: BaseException | None = None
        self._running = False
        self._finished = anyio.Event()
        self.attachments = 0  # successful attachments: the first one, then one per reconnection
        # Told of each attachment after `attachments` counts it: whoever counts reconnections
        # of thousands of handlers (loadgen's tick) learns of one when it happens instead of
        # summing every handler's count.
        self.on_attach: Callable[[], object] | None = None

    # ---- hooks ---------------------------------------------------------------------------------

    async def _attach(self, cnx: ClientConnection, deadline: float) -> None:
        """Register on `cnx`, create the producer/consumer on the broker and finish setting up."""
        raise NotImplementedError

    def _detach_connection(self, cnx: ClientConnection) -> None:
        """Unregister from `cnx` (no-op if not registered)."""
        raise NotImplementedError

    def _on_detached(self) -> None:
        """The attachment was lost; drop per-connection state (sync, from the reader task)."""

    def _on_failed(self, error: BaseException) -> None:
        """The handler failed for good; fail whatever is waiting."""

    def _closed_error(self) -> ClientClosedError:
        raise NotImplementedError

    def _start_loops(self, tg: anyio.abc.TaskGroup) -> None:
        """Start the subclass's background loops (batch timer, ack flusher, ...)."""

    # ---- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> HandlerState:
        """Where the handler is in its life (connecting, ready, closing ...)."""
        return self._state

    def is_connected(self) -> bool:
        """True while attached to a broker."""
        return self._state is HandlerState.READY and self._cnx is not None

    @property
    def broker_url(self) -> str | None:
        """The URL of the broker this handler is attached to, None while detached."""
        cnx = self._cnx
        return cnx.url if cnx is not None else None

    def _attached(self) -> ClientConnection | None:
        """The connection to write on, or None while detached.

        A connection that has ended but not yet told its handlers (its teardown runs when its
        tasks finish) counts as detached, so sync writers never see `ConnectionBrokenError`.
        """
        cnx = self._cnx
        if cnx is None or self._state is not HandlerState.READY or not cnx.is_open:
            return None
        return cnx

    def _check_usable(self) -> None:
        if self._state is HandlerState.FAILED and self._failure is not None:
            raise self._failure
        if self._state in _ENDED:
            raise self._closed_error()

    # ---- attaching -----------------------------------------------------------------------------

    async def _start(self) -> None:
        """Attach for the first time (rule 3), then run the background loop in the client."""
        deadline = self._clock.now() + self._client.operation_timeout
        delays = self._client.backoff.delays()
        while True:
            try:
                await self._connect_once(deadline)
                break
            except BrokerError as exc:
                if not exc.retriable:
                    self._state = HandlerState.FAILED
                    self._failure = exc
                    raise
                last: Exception = exc
            except _TRANSIENT as exc:
                last = exc
            delay = next(delays)
            if self._clock.now() + delay >= deadline:
                self._state = HandlerState.FAILED
                error = OperationTimeoutError(f"creating a handler for {self.topic} timed out")
                self._failure = error
                raise error from last
            await self._clock.sleep(delay)
        self._running = True
        self._client.spawn(self._run)

    async def _connect_once(self, deadline: float) -> None:
        url = await self._client.lookup(self.topic, deadline=deadline)
        cnx = await self._client.get_connection(url)
        self._cnx = cnx
        try:
            await self._attach(cnx, deadline)
            if self._cnx is not cnx:
                raise ConnectionBrokenError("detached while attaching")
        except BaseException:
            if self._cnx is cnx:
                self._cnx = None
                self._detach_connection(cnx)
            raise
        if self._state in _ENDED:
            return
        self.attachments += 1
        self._state = HandlerState.READY
        self._disconnected = anyio.Event()
        self._connected.set()
        if self.on_attach is not None:
            self.on_attach()

    async def _run(self) -> None:
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    self._start_loops(tg)
                    await self._reconnect_loop()
                    tg.cancel_scope.cancel()
        finally:
            self._finished.set()

    async def _reconnect_loop(self) -> None:
        while True:
            await self._disconnected.wait()
            if self._state in _ENDED:
                return
            await self._clock.sleep(next(self._reconnect_delays))
            if self._state in _ENDED:
                return
            try:
                await self._connect_once(self._clock.now() + self._client.operation_timeout)
            except BrokerError as exc:
                if not exc.retriable:
                    logger.warning("%s failed for good: %r", self.topic, exc)
                    self._fail(exc)
                    return
                logger.info("reattaching %s failed (will retry): %r", self.topic, exc)
            except _TRANSIENT as exc:
                logger.info("reattaching %s failed (will retry): %r", self.topic, exc)
            else:
                self._reconnect_delays = self._client.backoff.delays()

    def handle_close(self, cnx: ClientConnection) -> None:
        """Detach after CLOSE_PRODUCER / CLOSE_CONSUMER or a connection loss (rule 2)."""
        if cnx is not self._cnx:
            return
        self._cnx = None
        self._detach_connection(cnx)
        if self._connected.is_set():
            self._connected = anyio.Event()
        if self._state is HandlerState.READY:
            self._state = HandlerState.CONNECTING
        self._on_detached()
        self._disconnected.set()

    def _fail(self, error: BaseException) -> None:
        self._state = HandlerState.FAILED
        self._failure = error
        self._connected.set()  # wake waiters; they see the state and raise
        self._on_failed(error)
        self._scope.cancel()

    # ---- requests once attached (rule 4) -------------------------------------------------------

    async def _wait_connected(self, deadline: float, what: str) -> ClientConnection:
        while True:
            self._check_usable()
            cnx = self._attached()
            if cnx is not None:
                return cnx
            if self._cnx is not None and not self._cnx.is_open:
                self.handle_close(self._cnx)  # ended, teardown pending: detach now
            await with_deadline(self._clock, deadline, self._connected.wait, what)

    async def _request(self, build: Callable[[int], c.Command], what: str) -> c.Command:
        """Send a request built by `build(request_id)` and return the reply, retrying as in rule 4.

        Raises:
            OperationTimeoutError: no reply within the operation timeout.
            BrokerError: the broker refused it with a non-retriable error.
            ClientClosedError: the handler was closed.
        """
        deadline = self._clock.now() + self._client.operation_timeout
        delays = self._client.backoff.delays()
        while True:
            cnx = await self._wait_connected(deadline, what)
            try:
                return await wait_until(
                    cnx.request(build(cnx.new_request_id())), self._clock, deadline, what
                )
            except ConnectionBrokenError:
                # Rule 4: wait for the next attachment and ask again. The connection may have
                # ended without telling us yet; detach now so the wait below really waits.
                self.handle_close(cnx)
                continue
            except BrokerError as exc:
                delay = next(delays)
                if not exc.retriable or self._clock.now() + delay >= deadline:
                    raise
                await self._clock.sleep(delay)

    async def _close_on_broker(self, build: Callable[[int], c.Command], what: str) -> None:
        """Send CLOSE_PRODUCER / CLOSE_CONSUMER if attached and wait for SUCCESS (best effort)."""
        cnx = self._cnx
        if cnx is None or not cnx.is_open:
            return
        deadline = self._clock.now() + self._client.operation_timeout
        try:
            await wait_until(cnx.request(build(cnx.new_request_id())), self._clock, deadline, what)
        except (ConnectionBrokenError, OperationTimeoutError, BrokerError) as exc:
            # The broker forgets the handler with the connection anyway; nothing to retry.
            logger.info("%s for %s did not complete: %r", what, self.topic, exc)
        finally:
            self._cnx = None
            self._detach_connection(cnx)

    async def _stop(self) -> None:
        """End the background loop and wait for it."""
        self._connected.set()
        self._disconnected.set()
        self._scope.cancel()
        if self._running:
            await self._finished.wait()
