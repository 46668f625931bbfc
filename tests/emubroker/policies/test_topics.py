from __future__ import annotations

import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.metadata.paths import topic_policies_path
from emubroker.naming import NamespaceName, TopicName
from emubroker.policies import SubscriptionPolicies, TopicPolicies, TopicPolicyView
from emubroker.ratelimit.quotas import DispatchRate

pytestmark = pytest.mark.anyio

TOPIC = TopicName.parse("persistent://acme/orders/t")


async def test_stored_policies_are_read_back_by_a_new_view_and_reach_every_partition() -> None:
    store = MemoryMetadataStore()
    changed: list[NamespaceName | None] = []
    policies = TopicPolicies(
        dispatchRate=DispatchRate(10),
        subscriptionPolicies={"s": SubscriptionPolicies(dispatchRate=DispatchRate(3))},
    )
    await TopicPolicyView(store, changed.append).store(TOPIC.partition(1), policies)
    assert changed == [TOPIC.namespace]
    assert await store.exists(topic_policies_path(TOPIC))  # kept under the partitioned name

    fresh = TopicPolicyView(store, changed.append)
    assert fresh.get(TOPIC) is None
    await fresh.load()
    assert changed[-1] is None  # after a load, anything may have changed
    assert fresh.get(TOPIC) == policies
    assert fresh.get(TOPIC.partition(0)) == policies


async def test_empty_policies_delete_the_node() -> None:
    store = MemoryMetadataStore()
    view = TopicPolicyView(store)
    await view.store(TOPIC, TopicPolicies(maxProducerPerTopic=1))
    await view.store(TOPIC, TopicPolicies(maxProducerPerTopic=None))
    assert not await store.exists(topic_policies_path(TOPIC))
    assert view.get(TOPIC) is None


async def test_unreadable_stored_policies_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryMetadataStore()
    await store.put(topic_policies_path(TOPIC), b"{not json")
    view = TopicPolicyView(store)
    await view.load()
    assert view.get(TOPIC) is None
    assert "unreadable topic policies" in caplog.text


def test_without_a_store_the_view_is_memory_only() -> None:
    view = TopicPolicyView()
    view.set(TOPIC, TopicPolicies(maxConsumerPerTopic=2))
    assert view.get(TOPIC) == TopicPolicies(maxConsumerPerTopic=2)
    view.set(TOPIC, None)
    assert view.get(TOPIC) is None
