"""Pulsar's ``maxConcurrentLookupRequest``: lookups in flight over the whole broker.

Every LOOKUP and PARTITIONED_METADATA runs as a task until its answer is ready (it may wait for
metadata or for a topic to load). A client can pipeline thousands in one read, and nothing else
stops it from making the broker hold a task for each: past the limit, as Pulsar's
``ServerCnx.handleLookup`` / ``handlePartitionMetadataRequest`` do with their semaphore, the
request is answered at once in its failure form with ``TooManyRequests`` "Failed due to too many
pending lookup requests" (the client retries it after a backoff) and no task is started.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TOO_MANY_LOOKUPS", "LookupLimit"]

TOO_MANY_LOOKUPS: Final = "Failed due to too many pending lookup requests"
"""Pulsar's message for a lookup refused by the limit."""


class LookupLimit:
    """Lookups in flight, against ``maxConcurrentLookupRequest`` (0: no limit).

    Args:
        limit: The most lookups in flight at once.
    """

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self.in_flight = 0

    def try_acquire(self) -> bool:
        """Count one more lookup in flight, or refuse (False) at the limit."""
        if self.limit and self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def resize(self, limit: int) -> None:
        """A new limit (the key is dynamic in Pulsar); lookups in flight are not cut short."""
        self.limit = limit

    def release(self) -> None:
        """A lookup counted by :meth:`try_acquire` was answered."""
        self.in_flight -= 1
