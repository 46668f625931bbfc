"""The simulated cluster's kill: a broker being killed refuses connections as a dead one does.

A kill cancels the broker's tasks and waits for them to end; until then the broker object is
still the node's. A client reconnecting in that moment (its broker just went away) used to be
handed to the broker's ending task group, which raised RuntimeError into the client instead of
a refused connection: on the real clock, with the clients' first retry 0.1 s after the kill,
this failed the real-time failover comparison's run (1 run in 10 at a load of 8).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from emubroker import simulate
from emubroker.simulate.cluster import FIRST_SERVICE_PORT, FIRST_WEB_PORT, open_simulated_cluster
from emubroker.simulate.loop import run_loop
from protocol.clock import AnyioClock
from protocol.errors import ConnectionBrokenError
from tests.emubroker.simulate.scenarios import failover_scenario


def test_a_broker_being_killed_refuses_connections(tmp_path: Path) -> None:
    simulation = simulate.parse_simulation(failover_scenario())
    configs = [
        simulation.broker_config(
            index,
            brokerServicePort=FIRST_SERVICE_PORT + index,
            webServicePort=FIRST_WEB_PORT + index,
            emubrokerDispatchTraceDir=str(tmp_path / "dispatch"),
            emubrokerLoadBalancerTraceDir=str(tmp_path / "loadbalance"),
        )
        for index in range(len(simulation.brokers))
    ]
    port = FIRST_SERVICE_PORT + 1

    async def main() -> None:
        async with open_simulated_cluster(configs, clock=AnyioClock()) as cluster:
            transport = await cluster.connect("127.0.0.1", port)  # serving: it connects
            await transport.aclose()
            async with anyio.create_task_group() as tg:
                tg.start_soon(cluster.kill, 1)
                node = cluster._node(1)  # to catch the moment the kill has begun
                while not node.killed:
                    await anyio.lowlevel.checkpoint()
                assert not node.done.is_set()  # the broker's tasks are still ending
                with pytest.raises(ConnectionBrokenError, match="broker is down"):
                    await cluster.connect("127.0.0.1", port)
            with pytest.raises(ConnectionBrokenError, match="broker is down"):
                await cluster.connect("127.0.0.1", port)

    run_loop(main, clock=None, seed=0)
