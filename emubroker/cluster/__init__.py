"""The local cluster: a supervisor running one ``storage-stub`` and N broker processes.

``emubroker cluster`` (:mod:`emubroker.cluster.cli`) is its command line;
:func:`open_cluster` starts one from Python. It is a composition root: it runs the other
commands of this distribution as processes and imports no broker internals.
"""

from __future__ import annotations

from emubroker.cluster.running import open_cluster
from emubroker.cluster.spec import ClusterEvent, ClusterSpec
from emubroker.cluster.supervisor import Cluster

__all__ = ["Cluster", "ClusterEvent", "ClusterSpec", "open_cluster"]
