"""The CLI's argument helpers: names to REST paths, lists, pulsar-admin's durations."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Final

from emubroker.adminclient import AdminError
from emubroker.adminclient.paths import path as admin_path
from emubroker.naming import InvalidNameError, NamespaceName, TopicName

__all__ = [
    "csv_list",
    "namespace_admin_path",
    "namespace_name",
    "position_of",
    "quote",
    "relative_ms",
    "relative_seconds",
    "topic_admin_path",
]

# pulsar-admin's RelativeTimeUtil: a signed count, then an optional unit (seconds by default).
_DURATION: Final = re.compile(r"([+-]?\d+)([smhdwy]?)", re.IGNORECASE)
_UNIT_SECONDS: Final = {
    "": 1,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "y": 365 * 86400,
}


def quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def topic_admin_path(name: str) -> str:
    """``/admin/v2/{domain}/{tenant}/{namespace}/{topic}`` of a complete or short topic name."""
    try:
        topic = TopicName.parse(name)
    except InvalidNameError as exc:
        raise AdminError(f"invalid topic name: {exc}") from None
    return admin_path("topic", topic=str(topic))


def namespace_admin_path(name: str) -> str:
    """``/admin/v2/namespaces/{tenant}/{namespace}`` of ``tenant/namespace``."""
    try:
        namespace = NamespaceName.parse(name)
    except InvalidNameError as exc:
        raise AdminError(f"invalid namespace name: {exc}") from None
    return admin_path("namespace", namespace=str(namespace))


def namespace_name(name: str) -> str:
    namespace_admin_path(name)  # refuses an invalid name
    return str(NamespaceName.parse(name))


def csv_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def relative_seconds(text: str) -> int:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise AdminError(f"invalid time '{text}': use a number and a unit s, m, h, d, w or y")
    return int(match[1]) * _UNIT_SECONDS[match[2].lower()]


def relative_ms(text: str) -> int:
    return relative_seconds(text) * 1000


def position_of(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("latest", "earliest"):
        return lowered
    ledger, sep, entry = lowered.partition(":")
    if not (sep and ledger.lstrip("-").isdigit() and entry.lstrip("-").isdigit()):
        raise AdminError(f"invalid message id '{text}': use latest, earliest or ledgerId:entryId")
    return {"ledgerId": int(ledger), "entryId": int(entry)}
