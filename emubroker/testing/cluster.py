"""The handle a test drives a cluster with: the controls of ``testing.controls``, and ``aio``.

The synchronous controls are in ``controls``; their coroutine twins in ``aio``, which only
needs the controls: this module joins the two, so neither imports the other's user.
"""

from __future__ import annotations

import functools

from emubroker.testing.aio import AsyncPulsarCluster
from emubroker.testing.controls import DEFAULT_TIMEOUT, ClusterControls, DispatchLevel

__all__ = ["DEFAULT_TIMEOUT", "DispatchLevel", "PulsarCluster"]


class PulsarCluster(ClusterControls):
    """A running test cluster (made by ``run_cluster_in_thread`` or the fixtures).

    Attributes:
        mode: ``"thread"`` (brokers in a background thread) or ``"processes"``.
        storage: Fault injection on the cluster's bookie stub.
    """

    @functools.cached_property
    def aio(self) -> AsyncPulsarCluster:
        """The same controls as coroutines, for async tests on any event loop."""
        return AsyncPulsarCluster(self)
