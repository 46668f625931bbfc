"""``maxTopicsPerNamespace``: persistent topics a namespace may hold (Pulsar's rules)."""

from __future__ import annotations

import pytest

from emubroker.policies import Policies
from emubroker.topics.namespace_limits import TooManyTopicsError
from protocol.errors import NotAllowedError, ServerError
from tests.emubroker.topics.helpers import open_service, topic_name

pytestmark = pytest.mark.anyio

MESSAGE = "Exceed maximum number of topics in namespace."


async def test_auto_creation_stops_at_the_limit() -> None:
    async with open_service(max_topics_per_namespace=2) as service:
        await service.get_topic(topic_name("a"))
        await service.get_topic(topic_name("b"))
        with pytest.raises(TooManyTopicsError, match=MESSAGE) as refused:
            await service.get_topic(topic_name("c"))
        assert refused.value.code is ServerError.NotAllowedError  # what the client sees
        await service.get_topic(topic_name("a"))  # existing topics still load
        await service.delete_topic(topic_name("b"))
        await service.get_topic(topic_name("c"))  # room again


async def test_other_namespaces_system_topics_and_non_persistent_do_not_count() -> None:
    async with open_service(max_topics_per_namespace=1) as service:
        await service.get_topic(topic_name("a"))
        other = topic_name("a").__class__.parse("persistent://public/default-2/a")
        await service.get_topic(other)
        await service.get_topic(topic_name("__change_events"))
        await service.get_topic(topic_name("np", domain="non-persistent"))
        with pytest.raises(TooManyTopicsError):
            await service.get_topic(topic_name("b"))


async def test_a_partitioned_topic_needs_room_for_all_its_partitions() -> None:
    async with open_service(max_topics_per_namespace=3) as service:
        await service.get_topic(topic_name("a"))
        with pytest.raises(TooManyTopicsError):
            await service.create_partitioned_topic(topic_name("p"), 3)
        await service.create_partitioned_topic(topic_name("p"), 2)
        await service.get_topic(topic_name("p-partition-0"))
        await service.get_topic(topic_name("p-partition-1"))
        with pytest.raises(NotAllowedError):  # the namespace is full now
            await service.get_topic(topic_name("b"))


async def test_the_namespace_policy_wins_over_the_broker_key() -> None:
    policies = Policies(max_topics_per_namespace=1)
    async with open_service(
        max_topics_per_namespace=100, namespace_policies=lambda ns: policies
    ) as service:
        await service.get_topic(topic_name("a"))
        with pytest.raises(TooManyTopicsError):
            await service.get_topic(topic_name("b"))
        policies = Policies(max_topics_per_namespace=0)  # 0: no limit, whatever the broker says
        await service.get_topic(topic_name("b"))


async def test_growing_a_partitioned_topic_needs_room_for_the_new_partitions() -> None:
    async with open_service(max_topics_per_namespace=4) as service:
        await service.create_partitioned_topic(topic_name("p"), 2)
        with pytest.raises(TooManyTopicsError):
            await service.update_partitioned_topic(topic_name("p"), 5)
        await service.update_partitioned_topic(topic_name("p"), 4)
        assert service.partitions_of(topic_name("p")) == 4


async def test_system_topics_are_pulsars_not_any_double_underscore_name() -> None:
    # BrokerService.isSystemTopic, as for auto-creation: a system namespace's topic or one of
    # SystemTopicNames (a partition of one too); a user topic named "__x" counts as any other.
    async with open_service(max_topics_per_namespace=1) as service:
        await service.get_topic(topic_name("__mine"))
        with pytest.raises(TooManyTopicsError):
            await service.get_topic(topic_name("a"))
        await service.get_topic(topic_name("__change_events-partition-0"))
        await service.get_topic(topic_name("t__transaction_pending_ack"))
