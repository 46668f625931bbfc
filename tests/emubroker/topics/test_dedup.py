"""Message deduplication: the pure state, and topics with it switched on by config or policy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from emubroker.config import BrokerConfig
from emubroker.metadata import MemoryMetadataStore
from emubroker.storage import MemoryBackend
from emubroker.topics import TopicService, TopicSettings
from emubroker.topics.dedup import (
    DUPLICATE_POSITION,
    DedupState,
    Verdict,
    highest_sequence_id,
    is_last_chunk,
)
from emubroker.topics.features import TopicFeatures
from protocol.clock import FakeClock
from protocol.codec import encode_record
from protocol.commands import MessageMetadata
from protocol.errors import PersistenceError
from protocol.framing import build_entry
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    add_producer,
    make_entry,
    publish,
    topic_name,
)

# ---- the pure state ------------------------------------------------------------------------


def info(seq: int, *, batch: int | None = None, name: str = "p") -> Any:
    return make_entry(sequence_id=seq, batch=batch, producer_name=name)[2]


def test_new_duplicate_and_unknown_verdicts() -> None:
    state = DedupState()
    assert state.last_sequence_id("p") == -1
    assert state.check("p", 0, 0) is Verdict.NEW
    assert state.last_sequence_id("p") == 0  # pushed counts for PRODUCER_SUCCESS
    # Pushed but not yet stored: cannot tell.
    assert state.check("p", 0, 0) is Verdict.UNKNOWN
    state.stored("p", 0)
    assert state.check("p", 0, 0) is Verdict.DUPLICATE
    assert state.check("p", 1, 1) is Verdict.NEW
    assert state.check("q", 0, 0) is Verdict.NEW  # per producer name
    state.failed()  # p's 1 was never stored: forget it
    assert state.last_sequence_id("p") == 0
    assert state.check("p", 1, 1) is Verdict.NEW


def test_a_batch_covers_consecutive_sequence_ids() -> None:
    assert highest_sequence_id(info(5)) == 5
    assert highest_sequence_id(info(5, batch=3)) == 7
    state = DedupState.replay([info(0), info(1, batch=4), info(0, name="q")])
    assert state.last_sequence_id("p") == 4
    assert state.last_sequence_id("q") == 0
    assert state.check("p", 4, 4) is Verdict.DUPLICATE
    assert state.check("p", 5, 5) is Verdict.NEW


def chunk(chunk_id: int | None, chunks: int | None) -> bytes:
    meta = MessageMetadata(
        producer_name="p",
        sequence_id=3,
        publish_time=1,
        uuid="u" if chunks else None,
        chunk_id=chunk_id,
        num_chunks_from_msg=chunks,
    )
    return build_entry(encode_record(meta), b"part")


def test_only_the_last_chunk_is_checked() -> None:
    assert is_last_chunk(chunk(None, None))
    assert not is_last_chunk(chunk(0, 3))
    assert is_last_chunk(chunk(2, 3))
    state = DedupState()
    first = info(3)
    assert state.admit("p", chunk(0, 3), first) == -1  # stored, not recorded
    assert state.admit("p", chunk(1, 3), first) == -1
    assert state.admit("p", chunk(2, 3), first) == 3
    state.stored("p", 3)
    assert state.admit("p", chunk(0, 3), first) == -1  # a resent chunk 0 is stored again ...
    assert state.admit("p", chunk(2, 3), first) is None  # ... its last chunk is a duplicate


def test_admit_all_and_settle_keep_receipts_in_send_order() -> None:
    state = DedupState.replay([info(0), info(1)])
    sends = [make_entry(sequence_id=s) for s in (1, 2, 0, 3)]
    admission = state.admit_all("p", sends)
    assert admission.plan == [None, 0, None, 1]
    assert [f[2].sequence_id for f in admission.fresh] == [2, 3]
    positions = state.settle("p", admission, [(7, 2), (7, 3)])
    assert positions == [DUPLICATE_POSITION, (7, 2), DUPLICATE_POSITION, (7, 3)]
    assert state.persisted["p"] == 3


def test_settle_after_a_partial_write_stops_at_the_first_unstored_send() -> None:
    state = DedupState()
    sends = [make_entry(sequence_id=s) for s in (0, 1, 2)]
    admission = state.admit_all("p", sends)
    assert state.settle("p", admission, [(7, 0)]) == [(7, 0)]
    assert state.last_sequence_id("p") == 0  # 1 and 2 were pushed, then forgotten
    assert state.admit("p", sends[1][0], sends[1][2]) == 1


def test_unknown_verdicts_cut_the_run_or_fail() -> None:
    state = DedupState()
    twice = [make_entry(sequence_id=0), make_entry(sequence_id=0)]
    admission = state.admit_all("p", twice)
    assert admission.plan == [0]  # the second copy waits for the first to be stored
    state.settle("p", admission, [(7, 0)])
    assert state.admit_all("p", twice[1:]).plan == [None]
    pending = DedupState()
    pending.check("p", 5, 5)
    with pytest.raises(PersistenceError, match="duplicate"):
        pending.admit_all("p", [make_entry(sequence_id=5)])


def test_switching_off_drops_the_state_and_on_replays() -> None:
    infos = [info(0), info(1)]
    assert DedupState.switch(None, False, infos) is None
    state = DedupState.switch(None, True, infos)
    assert state is not None
    assert state.last_sequence_id("p") == 1
    assert DedupState.switch(state, True, []) is state


# ---- topics with deduplication -------------------------------------------------------------


@asynccontextmanager
async def dedup_service(
    *, broker_enabled: bool = True, policy: dict[str, Any] | None = None
) -> AsyncIterator[tuple[TopicService, MemoryMetadataStore]]:
    async with MemoryMetadataStore() as store:
        if policy is not None:
            await store.put("/admin/policies/public/default", msgspec.json.encode(policy))
        features = TopicFeatures(BrokerConfig(brokerDeduplicationEnabled=broker_enabled), store)
        service = TopicService(
            config=TopicSettings(),
            clock=FakeClock(),
            ledgers=MemoryBackend(LedgerStore()),
            namespaces=KNOWN_NAMESPACES.__contains__,
            features=features,
        )
        async with service.running():
            yield service, store


@pytest.mark.anyio
async def test_duplicates_are_receipted_minus_one_and_not_stored() -> None:
    async with dedup_service() as (service, _):
        topic: Any = await service.get_topic(topic_name("d1"))
        producer = await add_producer(topic, producer_name="prod")
        assert producer.last_sequence_id == -1
        ids = [
            await publish(topic, producer, sequence_id=s, producer_name="prod") for s in range(3)
        ]
        assert [e for _, e in ids] == [0, 1, 2]
        again = await publish(topic, producer, sequence_id=1, producer_name="prod")
        assert again == DUPLICATE_POSITION
        assert topic.ledger.count == 3
        # A batch of three after them is stored; resending it is not.
        assert (await publish(topic, producer, sequence_id=3, batch=3, producer_name="prod"))[
            1
        ] == 3
        assert await publish(topic, producer, sequence_id=3, batch=3, producer_name="prod") == (
            DUPLICATE_POSITION
        )
        assert topic.ledger.count == 4


@pytest.mark.anyio
async def test_last_sequence_id_survives_reconnects_and_unloads() -> None:
    async with dedup_service() as (service, _):
        name = topic_name("d2")
        topic: Any = await service.get_topic(name)
        producer = await add_producer(topic, producer_name="prod")
        for s in range(5):
            await publish(topic, producer, sequence_id=s, producer_name="prod")
        await topic.remove_producer(producer)
        again = await add_producer(topic, producer_name="prod")
        assert again.last_sequence_id == 4
        await service.unload(name)
        reloaded: Any = await service.get_topic(name)
        third = await add_producer(reloaded, producer_name="prod")
        assert third.last_sequence_id == 4
        other = await add_producer(reloaded, producer_id=2, producer_name="other")
        assert other.last_sequence_id == -1


@pytest.mark.anyio
async def test_namespace_policy_wins_over_the_broker_setting() -> None:
    async with dedup_service(broker_enabled=True, policy={"deduplicationEnabled": False}) as (
        service,
        store,
    ):
        topic: Any = await service.get_topic(topic_name("d3"))
        producer = await add_producer(topic, producer_name="prod")
        await publish(topic, producer, sequence_id=0, producer_name="prod")
        assert (await publish(topic, producer, sequence_id=0, producer_name="prod"))[1] == 1
        # Turned on by policy: the next producer finds the state rebuilt from the entries.
        await store.put(
            "/admin/policies/public/default",
            msgspec.json.encode({"deduplicationEnabled": True, "bundles": {}}),
        )
        later = await add_producer(topic, producer_id=2, producer_name="prod2")
        assert later.last_sequence_id == -1
        await topic.remove_producer(producer)
        back = await add_producer(topic, producer_id=3, producer_name="prod")
        assert back.last_sequence_id == 0
        assert await publish(topic, back, sequence_id=0, producer_name="prod") == (
            DUPLICATE_POSITION
        )


@pytest.mark.anyio
async def test_without_deduplication_repeats_are_stored() -> None:
    async with dedup_service(broker_enabled=False) as (service, _):
        topic: Any = await service.get_topic(topic_name("d4"))
        producer = await add_producer(topic, producer_name="prod")
        await publish(topic, producer, sequence_id=0, producer_name="prod")
        assert (await publish(topic, producer, sequence_id=0, producer_name="prod"))[1] == 1
        assert producer.last_sequence_id == -1
