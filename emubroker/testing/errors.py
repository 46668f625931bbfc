"""What a cluster handle raises: one family, messages that name what was wrong."""

from __future__ import annotations

__all__ = [
    "ClusterAdminError",
    "ClusterStoppedError",
    "ClusterTimeoutError",
    "PulsarClusterError",
    "UnknownBrokerError",
]


class PulsarClusterError(Exception):
    """Something a ``pulsar_cluster`` handle could not do."""


class ClusterStoppedError(PulsarClusterError, RuntimeError):
    """The handle was used after its cluster stopped (e.g. kept past its fixture's scope)."""


class UnknownBrokerError(PulsarClusterError, LookupError):
    """A broker reference names no broker of this cluster, or one in the wrong state."""


class ClusterTimeoutError(PulsarClusterError, TimeoutError):
    """A ``wait_*`` call ran out of time; the message says what was awaited and what was seen."""


class ClusterAdminError(PulsarClusterError):
    """A broker refused an admin call (the message quotes the call and its answer)."""
