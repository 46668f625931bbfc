"""An unload with a destination broker under the extensible load manager is a transfer.

Three brokers in one process (``tests.support.inprocess_cluster``). Pulsar's multi-phase unload
(``ownership.unloading`` rule 5): the destination owns the bundle before the clients hear of
the unload, and CLOSE_PRODUCER / CLOSE_CONSUMER carry its address, so that they reconnect
there without a lookup. The modular manager, or a destination that cannot take the bundle,
gives the plain unload: CLOSE_* without an address.
"""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.test_cluster_unload import bundle_of, produce, received, subscribe, take
from tests.support.inprocess_cluster import inprocess_cluster

pytestmark = pytest.mark.anyio


async def test_the_clients_are_sent_to_the_destination_which_already_owns_the_bundle(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock, loadManagerClassName=EXTENSIBLE_LOAD_MANAGER) as cl:
        source, destination = await take(cl, 1), cl.nodes[2]
        producer = await produce(source, 0, 3)
        consumer = await subscribe(source, permits=0)
        assert source.broker.unloader is not None
        bundle = bundle_of(source)
        assert await source.broker.unloader.unload(
            bundle, reason="admin", destination=destination.broker_id
        )
        url = destination.broker.service_url
        assert await producer.receive_command() == c.CloseProducer(
            producer_id=1, request_id=0, assigned_broker_service_url=url
        )
        assert await consumer.receive_command() == c.CloseConsumer(
            consumer_id=1, request_id=0, assigned_broker_service_url=url
        )
        assert not source.broker.ownership.is_owned(bundle)
        assert destination.broker.ownership.is_serving(bundle)
        # The clients go straight there, without a lookup, and are served.
        await produce(destination, 3, 2)
        reader = await subscribe(destination, permits=10)
        assert await received(reader, 5) == [b"m%d" % i for i in range(5)]


async def test_a_destination_that_cannot_take_the_bundle_leaves_a_plain_unload(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock, loadManagerClassName=EXTENSIBLE_LOAD_MANAGER) as cl:
        source = await take(cl, 1)
        producer = await produce(source, 0, 1)
        assert source.broker.unloader is not None
        assert await source.broker.unloader.unload(
            bundle_of(source), reason="admin", destination="127.0.0.1:9"
        )
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert not source.broker.ownership.is_owned(bundle_of(source))


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="modular"),
        pytest.param(
            {
                "loadManagerClassName": EXTENSIBLE_LOAD_MANAGER,
                "loadBalancerMultiPhaseBundleUnload": False,
            },
            id="extensible-single-phase",
        ),
    ],
)
async def test_without_a_transfer_the_clients_look_the_topic_up_again(
    fake_clock: FakeClock, overrides: dict[str, Any]
) -> None:
    async with inprocess_cluster(fake_clock, **overrides) as cl:
        source, destination = await take(cl, 1), cl.nodes[2]
        producer = await produce(source, 0, 1)
        assert source.broker.unloader is not None
        bundle = bundle_of(source)
        assert await source.broker.unloader.unload(
            bundle, reason="admin", destination=destination.broker_id
        )
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert not destination.broker.ownership.is_owned(bundle)
