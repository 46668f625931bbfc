"""``run_pulsar_cluster``: a test cluster as a context manager, with the fixture's defaults.

The defaults keep a client developer's test in charge of what moves: the load manager neither
sheds nor splits bundles by itself (``loadBalancerSheddingEnabled=false``,
``loadBalancerAutoBundleSplitEnabled=false``); a test that wants them passes the keys in
``config``. With ``mode="processes"`` a killed broker's session expires after
``metadataStoreSessionTimeoutMillis``, 2 s by default here (Pulsar's 30 s would make every
failover test wait that long); in the thread mode a kill ends it at once.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final, Literal

from emubroker.config import load_config
from emubroker.testing.cluster import PulsarCluster
from emubroker.testing.inprocess import run_thread_cluster
from emubroker.testing.processes import run_process_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = ["DEFAULT_CONFIG", "PROCESS_DEFAULT_CONFIG", "ClusterMode", "run_pulsar_cluster"]

ClusterMode = Literal["thread", "processes"]

DEFAULT_CONFIG: Final[Mapping[str, Any]] = {
    "loadBalancerSheddingEnabled": False,
    "loadBalancerAutoBundleSplitEnabled": False,
}
"""What every test cluster starts with, under the test's own ``config``."""

PROCESS_DEFAULT_CONFIG: Final[Mapping[str, Any]] = {"metadataStoreSessionTimeoutMillis": 2000}
"""Added for ``mode="processes"`` (see the module docstring)."""


@contextlib.contextmanager
def run_pulsar_cluster(
    brokers: int = 3,
    *,
    config: Mapping[str, Any] | None = None,
    mode: ClusterMode = "thread",
) -> Iterator[PulsarCluster]:
    """Start a cluster of ``brokers`` brokers on free loopback ports; stop it on exit.

    Args:
        brokers: How many (broker 0 starts first and leads).
        config: ``broker.conf`` keys for every broker, over :data:`DEFAULT_CONFIG`.
        mode: ``"thread"``: every broker in one background thread of this process, sharing an
            in-process metadata store and bookie stub. ``"processes"``: ``emubroker cluster``'s
            stub and broker processes.

    Yields:
        The cluster's handle; it raises ``ClusterStoppedError`` once the block has ended.

    Raises:
        ValueError: ``brokers`` below 1 or an unknown mode.
        ConfigError: A key or value of ``config`` is not valid (checked before anything starts).
    """
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    overrides = {**DEFAULT_CONFIG, **(PROCESS_DEFAULT_CONFIG if mode == "processes" else {})}
    overrides.update(config or {})
    cluster_name = load_config(overrides=overrides).clusterName
    if mode == "thread":
        backend_cm = run_thread_cluster(brokers, overrides)
    elif mode == "processes":
        backend_cm = run_process_cluster(brokers, overrides)  # type: ignore[assignment]
    else:
        raise ValueError(f"unknown cluster mode {mode!r}: use 'thread' or 'processes'")
    with backend_cm as backend:
        cluster = PulsarCluster(backend, cluster_name)
        try:
            yield cluster
        finally:
            cluster.mark_stopped()
