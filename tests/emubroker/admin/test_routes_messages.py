"""lastMessageId, peek, examine and get-message-by-id over REST, on entries sent over the wire."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from emubroker.admin.routes_messages import format_time
from protocol import commands as c
from protocol.batch import build_batch
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"
T = f"{NS}/t"
TOPIC = "persistent://public/default/t"
PUBLISHED = 1_700_000_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def produce(wire: Wire, topic: str, entries: list[tuple[c.MessageMetadata, bytes]]) -> None:
    """Publish entries with the given metadata (producer name and sequence id are replaced)."""
    client = await wire.client()
    await client.send(c.Producer(topic=topic, producer_id=1, request_id=0))
    reply = await client.receive_command()
    assert isinstance(reply, c.ProducerSuccess), reply
    for seq, (meta, payload) in enumerate(entries):
        meta = c.MessageMetadata(
            **{**_fields(meta), "producer_name": reply.producer_name, "sequence_id": seq}
        )
        await client.send_message(1, seq, payload, metadata=meta)
    for _ in entries:
        assert isinstance(await client.receive_command(), c.SendReceipt)


def _fields(meta: c.MessageMetadata) -> dict[str, Any]:
    return {name: getattr(meta, name) for name in meta.__struct_fields__}


def plain(publish_time: int = PUBLISHED, **fields: Any) -> c.MessageMetadata:
    return c.MessageMetadata(producer_name="", sequence_id=0, publish_time=publish_time, **fields)


async def fetch(admin: Admin, path: str) -> tuple[int, dict[str, str], bytes]:
    response = await admin.client.get(path)
    return response.status, dict(response.headers), await response.read()


async def ledger_of(admin: Admin) -> int:
    ledger: int = (await admin.ok("GET", f"{T}/lastMessageId"))["ledgerId"]
    return ledger


def test_format_time_is_java_iso_offset() -> None:
    assert format_time(PUBLISHED) == "2023-11-14T22:13:20Z"
    assert format_time(PUBLISHED + 120) == "2023-11-14T22:13:20.12Z"
    assert format_time(PUBLISHED + 7) == "2023-11-14T22:13:20.007Z"


async def test_last_message_id_plain_batch_and_empty(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", T)
    empty = await admin.ok("GET", f"{T}/lastMessageId")
    assert empty["entryId"] == -1
    assert empty["partitionIndex"] == -1
    ledger = empty["ledgerId"]
    await produce(wire, TOPIC, [(plain(), b"a")])
    assert await admin.ok("GET", f"{T}/lastMessageId") == {
        "ledgerId": ledger,
        "entryId": 0,
        "partitionIndex": -1,
        "batchIndex": -1,
        "batchSize": 0,
    }
    batch = build_batch([(c.SingleMessageMetadata(payload_size=1), b"x")] * 3)
    await produce(wire, TOPIC, [(plain(num_messages_in_batch=3), batch)])
    last = await admin.ok("GET", f"{T}/lastMessageId")
    assert (last["entryId"], last["batchIndex"]) == (1, 2)


async def test_message_by_id_headers_of_a_plain_message_with_properties_and_key(
    admin: Admin, wire: Wire
) -> None:
    meta = plain(
        properties=(c.KeyValue(key="k", value="v"), c.KeyValue(key="a<b", value="1")),
        partition_key="key-1",
        event_time=PUBLISHED + 5,
        ordering_key=b"\x00",
    )
    await produce(wire, TOPIC, [(meta, b"hello")])
    ledger = await ledger_of(admin)
    status, headers, body = await fetch(admin, f"{T}/ledger/{ledger}/entry/0")
    assert (status, body) == (200, b"hello")
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["X-Pulsar-Message-ID"] == f"{ledger}:0"
    assert json.loads(headers["X-Pulsar-PROPERTY"]) == {"k": "v", "a<b": "1"}
    assert "\\u003c" in headers["X-Pulsar-PROPERTY"]  # Gson escapes HTML characters
    assert headers["X-Pulsar-publish-time"] == "2023-11-14T22:13:20Z"
    assert headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.005Z"
    assert headers["X-Pulsar-partition-key"] == "key-1"
    assert headers["X-Pulsar-Base64-ordering-key"] == "AA=="
    assert headers["X-Pulsar-producer-name"].startswith("standalone-")
    assert headers["X-Pulsar-sequence-id"] == "0"
    assert headers["X-Pulsar-Is-Encrypted"] == "false"
    assert headers["X-Pulsar-txn-uncommitted"] == "false"
    assert "X-Pulsar-num-batch-message" not in headers
    assert "X-Pulsar-compression" not in headers


async def test_batch_entry_is_returned_whole(admin: Admin, wire: Wire) -> None:
    batch = build_batch(
        [(c.SingleMessageMetadata(payload_size=2), b"m%d" % i) for i in range(1, 3)]
    )
    await produce(wire, TOPIC, [(plain(num_messages_in_batch=2), batch)])
    ledger = await ledger_of(admin)
    status, headers, body = await fetch(admin, f"{T}/ledger/{ledger}/entry/0")
    assert (status, body) == (200, batch)
    assert headers["X-Pulsar-num-batch-message"] == "2"
    # The stored entry (checksum, metadata length, payload) less the metadata.
    assert headers["X-Pulsar-batch-size"] == str(len(batch) + 10)


async def test_zlib_payload_is_decompressed(admin: Admin, wire: Wire) -> None:
    meta = plain(compression=c.CompressionType.ZLIB, uncompressed_size=5)
    await produce(wire, TOPIC, [(meta, zlib.compress(b"plain"))])
    status, headers, body = await fetch(admin, f"{T}/examinemessage")
    assert (status, body) == (200, b"plain")
    assert (headers["X-Pulsar-compression"], headers["X-Pulsar-uncompressed-size"]) == ("ZLIB", "5")


async def test_a_zlib_bomb_is_shown_as_stored_not_inflated(admin: Admin, wire: Wire) -> None:
    # 200 MiB of zeros in 200 KiB, claiming 5 bytes: inflated whole it would take 200 MiB of
    # the broker's memory per request (a 5 MiB frame of it, 5 GiB).
    bomb = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    payload = b"".join(bomb.compress(chunk) for _ in range(200)) + bomb.flush()
    meta = plain(compression=c.CompressionType.ZLIB, uncompressed_size=5)
    await produce(wire, TOPIC, [(meta, payload)])
    status, _, body = await fetch(admin, f"{T}/examinemessage")
    assert (status, body) == (200, payload)


async def test_examine_from_either_end(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", T)
    await admin.fails(
        "GET", f"{T}/examinemessage", 412, "Could not examine messages due to the total message"
    )
    await produce(wire, TOPIC, [(plain(), b"m%d" % i) for i in range(1, 6)])
    examine = f"{T}/examinemessage"
    assert (await fetch(admin, examine))[2] == b"m5"
    assert (await fetch(admin, f"{examine}?messagePosition=2"))[2] == b"m4"
    assert (await fetch(admin, f"{examine}?initialPosition=earliest"))[2] == b"m1"
    assert (await fetch(admin, f"{examine}?initialPosition=earliest&messagePosition=0"))[2] == b"m1"
    assert (await fetch(admin, f"{examine}?initialPosition=earliest&messagePosition=3"))[2] == b"m3"
    # From latest, past the start stops at the first entry (Pulsar's getPositionAfterN).
    assert (await fetch(admin, f"{examine}?messagePosition=9"))[2] == b"m1"
    await admin.fails("GET", f"{examine}?initialPosition=earliest&messagePosition=6", 404, "")
    await admin.fails("GET", f"{examine}?messagePosition=abc", 400, "messagePosition")


async def test_peek_skips_acknowledged_entries(admin: Admin, wire: Wire) -> None:
    await produce(wire, TOPIC, [(plain(), b"m%d" % i) for i in range(1, 5)])
    await admin.ok("PUT", f"{T}/subscription/s", json="earliest")
    peek = f"{T}/subscription/s/position"
    assert (await fetch(admin, f"{peek}/1"))[2] == b"m1"
    assert (await fetch(admin, f"{peek}/4"))[2] == b"m4"
    await admin.fails("GET", f"{peek}/5", 404, "Message not found")
    await admin.ok("POST", f"{T}/subscription/s/skip/1")
    status, headers, body = await fetch(admin, f"{peek}/1")
    assert (status, body) == (200, b"m2")
    assert headers["X-Pulsar-Message-ID"].endswith(":1")
    await admin.fails("GET", f"{peek}/0", 400, "messagePosition")
    await admin.fails("GET", f"{peek}/x", 404, "messagePosition")


async def test_peek_of_an_unknown_subscription_creates_it_at_earliest(
    admin: Admin, wire: Wire
) -> None:
    await produce(wire, TOPIC, [(plain(), b"first")])
    assert (await fetch(admin, f"{T}/subscription/new/position/1"))[2] == b"first"
    assert await admin.ok("GET", f"{T}/subscriptions") == ["new"]


async def test_errors(admin: Admin, wire: Wire) -> None:
    missing = f"{NS}/missing"
    for path in (
        "lastMessageId",
        "examinemessage",
        "subscription/s/position/1",
        "ledger/1/entry/0",
    ):
        await admin.fails("GET", f"{missing}/{path}", 404, f"Topic {TOPIC[:-1]}missing not found")
    await produce(wire, TOPIC, [(plain(), b"a")])
    ledger = await ledger_of(admin)
    await admin.fails("GET", f"{T}/ledger/{ledger}/entry/1", 404, "Message id not found")
    await admin.fails("GET", f"{T}/ledger/{ledger + 99}/entry/0", 404, "Message id not found")
    await admin.fails("GET", f"{T}/ledger/x/entry/0", 404, "ledgerId")


async def test_partitioned_and_non_persistent(admin: Admin) -> None:
    p = f"{NS}/p"
    await admin.ok("PUT", f"{p}/partitions", data="2")
    await admin.fails("GET", f"{p}/lastMessageId", 404, "not found")
    await admin.fails("GET", f"{p}/examinemessage", 405, "Examine messages on a partitioned")
    await admin.fails("GET", f"{p}/subscription/s/position/1", 405, "Peek messages on a partition")
    await admin.fails("GET", f"{p}/ledger/1/entry/0", 405, "GetMessageById is not allowed on")
    last = await admin.ok("GET", f"{p}-partition-1/lastMessageId")
    assert (last["partitionIndex"], last["entryId"]) == (1, -1)
    np = "/admin/v2/non-persistent/public/default/np"
    await admin.ok("PUT", np)
    await admin.fails("GET", f"{np}/lastMessageId", 405, "GetLastMessageId on a non-persistent")
    await admin.fails("GET", f"{np}/examinemessage", 405, "Examine messages on a non-persistent")


async def test_message_id_by_timestamp(admin: Admin, wire: Wire) -> None:
    await produce(
        wire,
        TOPIC,
        [(plain(PUBLISHED), b"a"), (plain(PUBLISHED + 10), b"b"), (plain(PUBLISHED + 20), b"c")],
    )
    ledger = await ledger_of(admin)

    async def at(timestamp: int) -> tuple[int, int, int]:
        found = await admin.ok("GET", f"{T}/messageid/{timestamp}")
        return found["ledgerId"], found["entryId"], found["partitionIndex"]

    assert await at(0) == (ledger, 0, -1)
    assert await at(PUBLISHED) == (ledger, 0, -1)
    assert await at(PUBLISHED + 1) == (ledger, 1, -1)
    assert await at(PUBLISHED + 20) == (ledger, 2, -1)
    assert await at(PUBLISHED + 21) == (ledger, 3, -1)  # past the end: the next position
    await admin.fails("GET", f"{T}/messageid/x", 404, "timestamp")
    p = f"{NS}/p"
    await admin.ok("PUT", f"{p}/partitions", data="2")
    await admin.fails(
        "GET", f"{p}/messageid/0", 405, "Get message ID by timestamp on a partitioned"
    )
    found = await admin.ok("GET", f"{p}-partition-1/messageid/0")
    assert (found["partitionIndex"], found["entryId"]) == (1, 0)
