"""What a producer, consumer or reader needs from the client that owns it.

Handlers (`Producer`, `Consumer`, their partitioned forms, `Reader`) take a `HandlerHost` rather
than the `Client` class, so that the handler modules do not import the module that imports them:
`Client` satisfies this protocol, and tests may pass anything else that does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from protocol.backoff import Backoff
    from protocol.client.connection import ClientConnection
    from protocol.clock import Clock

__all__ = ["HandlerHost"]


class HandlerHost(Protocol):
    """The client as its handlers see it.

    Attributes:
        clock: The client's clock (deadlines, backoff sleeps, publish times).
        operation_timeout: Seconds an operation (create, close, seek, ...) may take.
        backoff: Delays between attempts to attach and to retry retriable errors.
    """

    clock: Clock
    operation_timeout: float
    backoff: Backoff

    def new_producer_id(self) -> int:
        """Return a producer id not used before on this client."""
        ...

    def new_consumer_id(self) -> int:
        """Return a consumer id not used before on this client."""
        ...

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `fn` in the client's task group (it ends when the client closes)."""
        ...

    def forget(self, handler: object) -> None:
        """Drop a closed handler from the set the client closes on exit."""
        ...

    async def lookup(self, topic: str, *, deadline: float | None = None) -> str:
        """Return the broker URL that serves `topic`, following redirects."""
        ...

    async def get_connection(self, url: str) -> ClientConnection:
        """Return the pooled connection to `url`, opening it if needed."""
        ...
