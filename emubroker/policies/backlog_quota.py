"""Backlog quotas: Pulsar's ``BacklogQuota`` JSON and which one applies to a topic.

A quota is kept per type in a map: ``destination_storage`` (a size in bytes, ``limitSize``) and
``message_age`` (an age in seconds, ``limitTime``), each with a retention policy saying what
happens when it is exceeded (``topics.backlog_quota``). The map sits in a namespace's
``Policies.backlog_quota_map`` and in a topic's ``TopicPolicies.backLogQuotaMap`` (Pulsar's
spellings). Which quota applies (``HierarchyTopicPolicies``): the topic's entry of that type,
else the namespace's, else the broker's default (``backlogQuotaDefaultLimitGB`` when positive,
else ``backlogQuotaDefaultLimitBytes``; ``backlogQuotaDefaultLimitSecond``;
``backlogQuotaDefaultRetentionPolicy``; -1 means no limit).

The JSON is Pulsar's ``BacklogQuotaImpl``: the deprecated ``limit`` and ``limitSize`` are the
same number (either may be given; ``limitSize`` wins), numbers may arrive as strings (the Go
client's tests post ``{"limit": "10240"}``, which Jackson accepts), and what is stored and read
back carries all four fields.
"""

from __future__ import annotations

import enum
from typing import Any, Final

import msgspec

__all__ = [
    "BACKLOG_QUOTA_TYPES",
    "BYTES_IN_GIGABYTE",
    "BacklogQuota",
    "BacklogQuotaError",
    "RetentionPolicy",
    "decode_backlog_quota",
    "quota_of",
]

BYTES_IN_GIGABYTE: Final = 1024 * 1024 * 1024
"""``BacklogQuotaImpl.BYTES_IN_GIGABYTE``: ``backlogQuotaDefaultLimitGB``'s unit."""

BACKLOG_QUOTA_TYPES: Final = ("destination_storage", "message_age")
"""``BacklogQuota.BacklogQuotaType``; the REST API's ``backlogQuotaType`` defaults to the first."""


class RetentionPolicy(enum.Enum):
    """What a broker does when a topic's backlog exceeds its quota."""

    producer_request_hold = "producer_request_hold"
    """Producers are disconnected and refused (retriable) until the backlog is back under."""
    producer_exception = "producer_exception"
    """Producers are disconnected and refused with a non-retriable error."""
    consumer_backlog_eviction = "consumer_backlog_eviction"
    """The slowest subscriptions skip their oldest backlog."""


class BacklogQuotaError(ValueError):
    """A backlog quota body that does not decode."""


class BacklogQuota(msgspec.Struct, frozen=True):
    """One backlog quota, in Pulsar's JSON shape (``limit`` mirrors ``limitSize``).

    Attributes:
        limit: The size limit in bytes (deprecated name).
        limitSize: The size limit in bytes; -1: none.
        limitTime: The age limit in seconds; -1 (or 0): none.
        policy: What exceeding it does; None: not given (Pulsar stores it so and enforces
            nothing for it).
    """

    limit: int = -1
    limitSize: int = -1
    limitTime: int = -1
    policy: RetentionPolicy | None = None


class _Body(msgspec.Struct):
    limit: int | None = None
    limitSize: int | None = None
    limitTime: int | None = None
    policy: RetentionPolicy | None = None


_decode_body = msgspec.json.Decoder(_Body, strict=False).decode


def decode_backlog_quota(body: bytes) -> BacklogQuota:
    """A quota from a REST body, normalized as Pulsar's setters do.

    Raises:
        BacklogQuotaError: The body is not a ``BacklogQuota`` object.
    """
    try:
        raw = _decode_body(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BacklogQuotaError(f"Invalid backlog quota: {exc}") from None
    # BacklogQuotaImpl: the long ``limit`` defaults to 0 and ``getLimitSize`` falls back on it.
    size = raw.limitSize if raw.limitSize is not None else (raw.limit or 0)
    return BacklogQuota(limit=size, limitSize=size, limitTime=raw.limitTime or 0, policy=raw.policy)


_convert = msgspec.convert


def quota_of(stored: Any) -> BacklogQuota | None:
    """A quota as stored in a policies map (a JSON object), None when it does not read as one."""
    if isinstance(stored, BacklogQuota):
        return stored
    if not isinstance(stored, dict):
        return None
    try:
        return _convert(stored, BacklogQuota, strict=False)
    except msgspec.ValidationError:
        return None
