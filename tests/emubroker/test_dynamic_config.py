"""Dynamic configuration: Pulsar's dynamic keys, validation, the shared map, live application."""

from __future__ import annotations

import json

import anyio
import pytest

from emubroker.config import BrokerConfig
from emubroker.dynamic_config import (
    PULSAR_DYNAMIC_KEYS,
    DynamicConfig,
    InvalidDynamicValueError,
    NotDynamicError,
)
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.metadata.paths import DYNAMIC_CONFIGURATION_PATH

pytestmark = pytest.mark.anyio


def test_dynamic_keys_are_pulsars_that_we_emulate() -> None:
    keys = DynamicConfig.dynamic_keys()
    assert "allowAutoTopicCreation" in keys
    assert "defaultNumPartitions" in keys
    assert "clusterName" not in keys  # not dynamic in Pulsar
    assert set(keys) <= PULSAR_DYNAMIC_KEYS
    assert "brokerServicePort" not in PULSAR_DYNAMIC_KEYS


def test_check_refuses_static_unknown_and_invalid_values() -> None:
    dynamic = DynamicConfig(BrokerConfig())
    with pytest.raises(NotDynamicError, match="Can't update non-dynamic configuration"):
        dynamic.check("clusterName", "x")
    with pytest.raises(NotDynamicError):
        dynamic.check("noSuchKey", "1")
    with pytest.raises(InvalidDynamicValueError, match="Invalid dynamic-config value"):
        dynamic.check("defaultNumPartitions", "zero")
    with pytest.raises(InvalidDynamicValueError):
        dynamic.check("defaultNumPartitions", "0")  # must be positive
    assert dynamic.check("defaultNumPartitions", "7").defaultNumPartitions == 7
    assert dynamic.config.defaultNumPartitions == 1  # check applies nothing


async def test_update_persists_applies_and_notifies() -> None:
    async with MemoryMetadataStore() as store:
        dynamic = DynamicConfig(BrokerConfig(), store)
        seen: list[bool] = []
        unsubscribe = dynamic.subscribe(lambda c: seen.append(c.allowAutoTopicCreation))
        await dynamic.update("allowAutoTopicCreation", "false")
        assert dynamic.config.allowAutoTopicCreation is False
        assert seen == [False]
        assert dynamic.overrides() == {"allowAutoTopicCreation": "false"}
        assert dynamic.runtime()["allowAutoTopicCreation"] == "false"
        node = await store.get(DYNAMIC_CONFIGURATION_PATH)
        assert node is not None
        assert json.loads(node.value) == {"allowAutoTopicCreation": "false"}
        await dynamic.update("allowAutoTopicCreation", "false")  # no change: nobody is told
        assert seen == [False]
        await dynamic.delete("allowAutoTopicCreation")
        assert dynamic.runtime()["allowAutoTopicCreation"] == "true"  # the start-up value again
        assert seen == [False, True]
        unsubscribe()
        await dynamic.update("defaultNumPartitions", "3")
        assert seen == [False, True]
        with pytest.raises(NotDynamicError, match="Can't delete non-dynamic"):
            await dynamic.delete("clusterName")


async def test_every_broker_of_a_cluster_applies_a_change() -> None:
    tree = MemoryMetadataTree()
    async with (
        tree.open_session() as store_a,
        tree.open_session() as store_b,
        anyio.create_task_group() as tg,
    ):
        a = DynamicConfig(BrokerConfig(), store_a)
        b = DynamicConfig(BrokerConfig(), store_b)
        await tg.start(b.watch)
        await a.update("dispatcherMaxReadBatchSize", "7")
        await anyio.wait_all_tasks_blocked()
        assert b.config.dispatcherMaxReadBatchSize == 7
        assert b.overrides() == {"dispatcherMaxReadBatchSize": "7"}
        tg.cancel_scope.cancel()


async def test_a_late_broker_loads_the_stored_map_and_skips_bad_values() -> None:
    async with MemoryMetadataStore() as store:
        stored = {
            "defaultNumPartitions": "5",
            "dispatcherMaxReadBatchSize": "many",
            "allowAutoTopicCreation": "maybe",
            "future": "1",
        }
        await store.put(DYNAMIC_CONFIGURATION_PATH, json.dumps(stored).encode())
        dynamic = DynamicConfig(BrokerConfig(), store)
        await dynamic.load()
        assert dynamic.config.defaultNumPartitions == 5
        default = BrokerConfig().dispatcherMaxReadBatchSize
        assert dynamic.config.dispatcherMaxReadBatchSize == default  # the bad value is ignored
        # Boolean.valueOf: anything but "true" is false, as Pulsar reads it.
        assert dynamic.config.allowAutoTopicCreation is False


async def test_without_a_store_updates_stay_local() -> None:
    dynamic = DynamicConfig(BrokerConfig())
    await dynamic.update("defaultNumPartitions", "2")
    assert dynamic.config.defaultNumPartitions == 2
    with anyio.move_on_after(0):  # watch without a store just waits
        await dynamic.watch()
