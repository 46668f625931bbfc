"""Read-only message routes under ``/admin/v2/{domain}/{tenant}/{namespace}/{topic}``.

Pulsar's ``PersistentTopics`` calls that show stored entries: ``lastMessageId`` and
``messageid/{timestamp}`` (a JSON message id), and three that answer one entry as
``application/octet-stream`` with its metadata in ``X-Pulsar-*`` headers
(``PersistentTopicsBase.generateResponseWithEntry``):

* ``subscription/{sub}/position/{n}`` (peek): the n-th entry after the mark-delete position,
  individually acknowledged entries skipped. An unknown subscription is created at earliest,
  as Pulsar's ``getSubscriptionReference`` does.
* ``examinemessage?initialPosition=latest|earliest&messagePosition=N``: the N-th entry from
  either end (default latest, 1; a position below 1 is 1).
* ``ledger/{ledgerId}/entry/{entryId}``: one entry by id.

The body is the entry's payload, the whole batch for a batched entry, ZLIB-decompressed as
Pulsar decompresses it (LZ4/ZSTD/SNAPPY payloads are returned as stored: no decoder here).
On a partitioned topic's own name the three are 405 and ``lastMessageId`` is 404, on a
non-persistent topic all are 405, as in Pulsar. Deviations: a position past the end is 404
"Message not found" for peek (as Pulsar) and examine (Pulsar: 500 from the failed read), an
entry id past its ledger's end is 404 "Message id not found" (Pulsar: 500 from the bookie), and
a peek position below 1 is 400 (Pulsar: 500 from ``checkArgument``). Timestamps are formatted
in UTC (Pulsar: the broker's zone).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web
from multidict import CIMultiDict

from emubroker.admin.errors import (
    BAD_REQUEST,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import context, json_response, path_int, topic_of
from emubroker.admin.routes_topics import TOPIC, check_topic_namespace, load_topic
from emubroker.admin.stats_fields import format_time
from protocol.codec import decode_record, encode_record
from protocol.commands import CompressionType, MessageIdData, MessageMetadata
from protocol.framing import decode_payload_section
from protocol.ids import EARLIEST
from protocol.inflate import inflate_zlib

if TYPE_CHECKING:
    from emubroker.topics import Topic

__all__ = ["add_routes", "format_time", "message_headers"]

_EARLIEST: Final = MessageIdData(ledger_id=EARLIEST.ledger_id, entry_id=EARLIEST.entry_id)

_GSON_ESCAPES: Final = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&='"})


# ---- headers --------------------------------------------------------------------------------


def _text(value: object) -> str:
    # JAX-RS writes header objects with toString(): Java booleans are lower case.
    return str(value).lower() if isinstance(value, bool) else str(value)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _time(ms: int | None) -> str | None:
    return None if ms is None else format_time(ms)


def message_headers(
    meta: MessageMetadata, position: tuple[int, int], batch_size: int
) -> CIMultiDict[str]:
    """The ``X-Pulsar-*`` headers Pulsar sets for a stored entry.

    Args:
        meta: The entry's ``MessageMetadata``.
        position: Its ``(ledger_id, entry_id)``.
        batch_size: The entry's size less its metadata (Pulsar's ``X-Pulsar-batch-size``).
    """
    headers: CIMultiDict[str] = CIMultiDict()
    add = headers.add
    add("X-Pulsar-Message-ID", f"{position[0]}:{position[1]}")
    properties = {kv.key: kv.value for kv in meta.properties}  # Gson: the last of a key wins
    add("X-Pulsar-PROPERTY", json.dumps(properties, separators=(",", ":")).translate(_GSON_ESCAPES))
    add("X-Pulsar-publish-time", format_time(meta.publish_time))
    optional: list[tuple[str, Any]] = [
        ("X-Pulsar-event-time", _time(meta.event_time)),
        ("X-Pulsar-deliver-at-time", _time(meta.deliver_at_time)),
        ("X-Pulsar-num-batch-message", meta.num_messages_in_batch),
        ("X-Pulsar-batch-size", batch_size if meta.num_messages_in_batch is not None else None),
        ("X-Pulsar-null-value", meta.null_value),
    ]
    if meta.num_chunks_from_msg is not None:
        optional.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", meta.num_chunks_from_msg))
        optional.append(("X-Pulsar-PROPERTY-CHUNK-ID", meta.chunk_id or 0))
    optional.append(("X-Pulsar-Is-Encrypted", bool(meta.encryption_keys)))
    optional += [
        ("X-Pulsar-producer-name", meta.producer_name),
        ("X-Pulsar-sequence-id", meta.sequence_id),
        ("X-Pulsar-replicated-from", meta.replicated_from),
        *(("X-Pulsar-replicated-to", cluster) for cluster in meta.replicate_to),
        ("X-Pulsar-partition-key", meta.partition_key),
        ("X-Pulsar-compression", None if meta.compression is None else meta.compression.name),
        ("X-Pulsar-uncompressed-size", meta.uncompressed_size),
        ("X-Pulsar-encryption-algo", meta.encryption_algo),
        *(
            ("X-Pulsar-Base64-encryption-keys", str(_b64(encode_record(k))))
            for k in meta.encryption_keys
        ),
        ("X-Pulsar-Base64-encryption-param", _b64(meta.encryption_param)),
        ("X-Pulsar-Base64-schema-version", _b64(meta.schema_version)),
        ("X-Pulsar-partition-key-b64-encoded", meta.partition_key_b64_encoded),
        ("X-Pulsar-Base64-ordering-key", _b64(meta.ordering_key)),
        ("X-Pulsar-marker-type", meta.marker_type),
        ("X-Pulsar-highest-sequence-id", meta.highest_sequence_id),
        ("X-Pulsar-uuid", meta.uuid),
        ("X-Pulsar-num-chunks-from-msg", meta.num_chunks_from_msg),
        ("X-Pulsar-total-chunk-msg-size", meta.total_chunk_msg_size),
        ("X-Pulsar-chunk-id", meta.chunk_id),
        ("X-Pulsar-null-partition-key", meta.null_partition_key),
        ("X-Pulsar-txn-uncommitted", False),  # no transactions: everything is committed
    ]
    for name, value in optional:
        if value is not None:
            add(name, _text(value))
    return headers


def _body(meta: MessageMetadata, payload: memoryview) -> bytes:
    # Pulsar decodes the payload unless it is encrypted; we can only undo ZLIB.
    if meta.compression == CompressionType.ZLIB and not meta.encryption_keys:
        inflated = inflate_zlib(payload, meta.uncompressed_size)
        if inflated is not None:
            return inflated
    return bytes(payload)


async def _entry_response(topic: Topic, index: int) -> web.Response:
    ledger = topic.ledger
    _, _, sections = await ledger.read_entries(index, index)
    section = sections[0]
    stored = decode_payload_section(section)
    meta = decode_record(MessageMetadata, stored.metadata)
    # Pulsar's batch size: the stored entry (checksum and metadata length included) less the
    # serialized metadata.
    headers = message_headers(meta, ledger.position(index), len(section) - len(stored.metadata))
    headers["Content-Type"] = "application/octet-stream"
    return web.Response(body=_body(meta, stored.body), headers=headers)


# ---- topic lookup ---------------------------------------------------------------------------


async def _stored_topic(request: web.Request, what: str, partitioned: str) -> Topic:
    """The persistent, non-partitioned topic of the path (405 ``partitioned`` / ``what``...)."""
    ctx = context(request)
    name = topic_of(request)
    check_topic_namespace(ctx, name)
    if ctx.topics.partitions_of(name):
        raise RestError(METHOD_NOT_ALLOWED, partitioned)
    topic = (await load_topic(ctx, name)).as_persistent()
    if topic is None:
        raise RestError(METHOD_NOT_ALLOWED, f"{what} on a non-persistent topic is not allowed")
    return topic


def _message_id(ledger_id: int, entry_id: int, partition: int, batch_index: int) -> dict[str, int]:
    # Jackson's view of MessageIdImpl / BatchMessageIdImpl: every public getter, nulls omitted.
    doc = {
        "ledgerId": ledger_id,
        "entryId": entry_id,
        "partitionIndex": partition,
        "batchIndex": batch_index,
        "batchSize": 0,
    }
    if batch_index >= 0:
        doc.update(outstandingAcksInSameBatch=0, originalBatchSize=0)
    return doc


# ---- handlers -------------------------------------------------------------------------------


async def last_message_id(request: web.Request) -> web.Response:
    """``GET TOPIC/lastMessageId``: the last entry's id; ``entryId`` -1 when empty."""
    ctx = context(request)
    name = topic_of(request)
    if not ctx.namespaces.exists(name.namespace):  # as Pulsar: no namespace, no topic
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    topic = await load_topic(ctx, name)
    if topic.as_persistent() is None:
        raise RestError(
            METHOD_NOT_ALLOWED, "GetLastMessageId on a non-persistent topic is not allowed"
        )
    ledger_id, entry_id, batch_index = topic.last_message_id()
    return json_response(_message_id(ledger_id, entry_id, name.partition_index, batch_index))


async def peek_nth(request: web.Request) -> web.Response:
    """``GET TOPIC/subscription/{subscription}/position/{messagePosition}``."""
    n = path_int(request, "messagePosition", minimum=1)
    topic = await _stored_topic(
        request, "Peek messages", "Peek messages on a partitioned topic is not allowed"
    )
    name = request.match_info["subscription"]
    sub = topic.subscription(name) or topic.create_subscription(name, _EARLIEST)
    index = sub.cursor.nth_unacked(n, topic.ledger.count)
    if index is None:
        raise RestError(NOT_FOUND, "Message not found")
    return await _entry_response(topic, index)


def _query_int(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise RestError(BAD_REQUEST, f"Invalid {name} '{text}': not an integer") from None


async def examine(request: web.Request) -> web.Response:
    """``GET TOPIC/examinemessage?initialPosition=latest|earliest&messagePosition=N``."""
    n = max(_query_int(request, "messagePosition", 1), 1)
    earliest = request.query.get("initialPosition") == "earliest"
    topic = await _stored_topic(
        request,
        "Examine messages",
        "Examine messages on a partitioned topic is not allowed, "
        "please try examine message on specific topic partition",
    )
    ledger = topic.ledger
    first, end = ledger.first_index, ledger.count
    if end - first <= 0:
        raise RestError(
            PRECONDITION_FAILED, "Could not examine messages due to the total message is zero"
        )
    # Past the start from latest, Pulsar's getPositionAfterN stops at the first entry.
    index = first + n - 1 if earliest else max(end - n, first)
    if index >= end:
        raise RestError(NOT_FOUND, "Message not found")
    return await _entry_response(topic, index)


async def message_by_id(request: web.Request) -> web.Response:
    """``GET TOPIC/ledger/{ledgerId}/entry/{entryId}``."""
    ledger_id = path_int(request, "ledgerId")
    entry_id = path_int(request, "entryId")
    topic = await _stored_topic(
        request, "GetMessageById", "GetMessageById is not allowed on partitioned-topic"
    )
    index = topic.ledger.index_of(ledger_id, entry_id)
    if index is None or index < topic.ledger.first_index:
        raise RestError(NOT_FOUND, "Message id not found")
    return await _entry_response(topic, index)


async def message_id_at(request: web.Request) -> web.Response:
    """``GET TOPIC/messageid/{timestamp}``: the first message published at or after it.

    Past the last message, the position after it, as Pulsar's ``asyncFindPosition`` answers.
    """
    timestamp = path_int(request, "timestamp")
    topic = await _stored_topic(
        request,
        "Get message ID by timestamp",
        "Get message ID by timestamp on a partitioned topic is not allowed, "
        "please try do it on specific topic partition",
    )
    ledger = topic.ledger
    found = ledger.count
    # Publish times of several producers interleave, so scan rather than bisect.
    for index in range(ledger.first_index, ledger.count):
        if ledger.infos[index - ledger.base].publish_time >= timestamp:
            found = index
            break
    ledger_id, entry_id = ledger.position(found)
    return json_response(_message_id(ledger_id, entry_id, topic_of(request).partition_index, -1))


def add_routes(app: web.Application) -> None:
    """Register the message routes of both domains."""
    router = app.router
    router.add_get(f"{TOPIC}/lastMessageId", last_message_id)
    router.add_get(TOPIC + "/messageid/{timestamp}", message_id_at)
    router.add_get(f"{TOPIC}/subscription/{{subscription}}/position/{{messagePosition}}", peek_nth)
    router.add_get(f"{TOPIC}/examinemessage", examine)
    router.add_get(f"{TOPIC}/ledger/{{ledgerId}}/entry/{{entryId}}", message_by_id)
