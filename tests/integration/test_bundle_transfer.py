"""A bundle transferred between brokers that serve their admin API over HTTP (a thread cluster).

Under the extensible load manager an admin unload with ``destinationBroker`` hands the bundle to
the destination (its authoritative HTTP lookup, ``admin.owner_admin.http_take_over``) before the
clients hear of it; CLOSE_PRODUCER carries the destination's address, and a PRODUCER sent there
directly, with no lookup, is served. Read off the wire with a raw client.
"""

from __future__ import annotations

from urllib.parse import urlparse

import anyio
import pytest

from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER
from emubroker.testing import run_pulsar_cluster
from protocol import commands as c
from tests.support.broker import WireClient

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/transferred"
GUARD = 30  # seconds; a failure guard only


async def _producer(service_url: str, tg: anyio.abc.TaskGroup) -> WireClient:
    parsed = urlparse(service_url)
    assert parsed.hostname is not None
    assert parsed.port is not None
    stream = await anyio.connect_tcp(parsed.hostname, parsed.port)
    tg.start_soon(_close_at_exit, stream)
    client = WireClient(stream)
    await client.handshake()
    await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1))
    ready = await client.receive_command()
    assert isinstance(ready, c.ProducerSuccess), ready
    return client


async def _close_at_exit(stream: anyio.abc.ByteStream) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        await stream.aclose()


def test_an_unload_to_a_destination_sends_the_producer_there_without_a_lookup() -> None:
    config = {"loadManagerClassName": EXTENSIBLE_LOAD_MANAGER}
    with run_pulsar_cluster(2, config=config) as cluster:
        cluster.admin("PUT", "/admin/v2/persistent/public/default/transferred")
        source = cluster.wait_until_owned(TOPIC)
        destination = next(b for b in cluster.brokers if b != source)

        async def transfer() -> c.Command:
            with anyio.fail_after(GUARD):
                async with anyio.create_task_group() as tg:
                    producer = await _producer(source.service_url, tg)
                    await cluster.aio.unload(TOPIC, to=destination)
                    closed = await producer.receive_command()
                    # Straight to the destination: it owns the bundle already.
                    await _producer(destination.service_url, tg)
                    tg.cancel_scope.cancel()
            return closed

        closed = anyio.run(transfer)
        assert isinstance(closed, c.CloseProducer), closed
        assert closed.producer_id == 1
        assert closed.assigned_broker_service_url == destination.service_url
        assert cluster.owner_of(TOPIC) == destination
