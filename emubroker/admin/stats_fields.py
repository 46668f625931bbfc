"""Small pieces of Pulsar's stats documents: the compaction block, draining counts, ISO times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from emubroker.topics.compaction import CompactionRecord

__all__ = ["NO_COMPACTION", "compaction_block", "draining_counts", "format_time", "iso_time"]

NO_COMPACTION: Final = CompactionRecord()
"""What a topic never compacted here reports (Pulsar's reset ``CompactionStatsImpl``)."""


def compaction_block(record: CompactionRecord) -> dict[str, int]:
    """Pulsar's ``CompactionStats`` of topic stats."""
    return {
        "lastCompactionRemovedEventCount": record.removed_events,
        "lastCompactionSucceedTimestamp": record.succeed_ms,
        "lastCompactionFailedTimestamp": record.failed_ms,
        "lastCompactionDurationTimeInMills": record.duration_ms,
    }


def draining_counts(counts: tuple[int, int, int]) -> dict[str, int]:
    """Key_Shared draining hashes (PIP-379) under Pulsar's stats names (0 on other types)."""
    count, unacked, cleared = counts
    return {
        "drainingHashesCount": count,
        "drainingHashesUnackedMessages": unacked,
        "drainingHashesClearedTotal": cleared,
    }


def iso_time(epoch_ms: int) -> str:
    """Pulsar's ``DateFormatter.format``: ISO_OFFSET_DATE_TIME in the broker's zone."""
    return _java_iso(datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).astimezone(), epoch_ms)


def format_time(ms: int) -> str:
    """Java's ``ISO_OFFSET_DATE_TIME`` of epoch ms in UTC: fraction digits only as needed."""
    return _java_iso(datetime.fromtimestamp(ms / 1000, tz=UTC), ms)


def _java_iso(moment: datetime, epoch_ms: int) -> str:
    # As Java prints it: the fraction only when not zero, without trailing zeros; ``Z`` for UTC.
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if millis := epoch_ms % 1000:
        text += f".{millis:03d}".rstrip("0")
    offset = moment.strftime("%z")
    return text + ("Z" if offset == "+0000" else f"{offset[:3]}:{offset[3:]}")
