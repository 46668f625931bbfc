from __future__ import annotations

import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.metadata.walk import walk, walk_topics
from emubroker.naming import TopicName

pytestmark = pytest.mark.anyio


async def test_walk_reads_every_node_at_one_depth_with_its_parts() -> None:
    store = MemoryMetadataStore()
    await store.put("/r/a", b"tenant a")
    await store.put("/r/a/x", b"ax")
    await store.put("/r/b/y", b"by")
    await store.put("/r/b/y/deeper", b"too deep")
    found = await walk(store, "/r", 2)
    assert sorted(found) == [(["a", "x"], b"ax"), (["b", "y"], b"by")]
    # /r/b was never written, only below: a listed child that reads as nothing is skipped.
    assert await walk(store, "/r", 1) == [(["a"], b"tenant a")]


async def test_walk_of_a_missing_root_finds_nothing() -> None:
    assert await walk(MemoryMetadataStore(), "/nothing/here", 3) == []


async def test_walk_topics_names_the_nodes_and_skips_what_is_no_topic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryMetadataStore()
    await store.put("/t/acme/orders/persistent/a%20b", b"1")
    await store.put("/t/acme/orders/non-persistent/c", b"2")
    await store.put("/t/acme/orders/no-such-domain/d", b"3")
    found = dict(await walk_topics(store, "/t"))
    assert found == {
        TopicName.parse("persistent://acme/orders/a b"): b"1",
        TopicName.parse("non-persistent://acme/orders/c"): b"2",
    }
    assert "ignoring unparsable topic node /t/acme/orders/no-such-domain/d" in caplog.text
