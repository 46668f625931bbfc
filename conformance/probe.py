"""What a scenario uses to observe a broker: a quiet client, admin REST calls, and normalisers.

Everything a scenario returns is JSON-able. Values that must differ between two brokers
(timestamps, addresses, ledger ids, versions) are normalised here, where they are read, so the
diff compares only what a user could rely on.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pulsar
import requests

from conformance.brokers import Target

_QUIET = logging.getLogger("conformance.client")
_QUIET.setLevel(logging.CRITICAL)
TIMEOUT_S = 10


@dataclass
class Probe:
    """One scenario's view of one broker."""

    target: Target
    session: requests.Session = field(default_factory=requests.Session)
    ledgers: dict[int, str] = field(default_factory=dict)

    @contextmanager
    def client(self) -> Iterator[pulsar.Client]:
        """A client of the target, closed afterwards."""
        client = pulsar.Client(
            self.target.service_url, operation_timeout_seconds=TIMEOUT_S, logger=_QUIET
        )
        try:
            yield client
        finally:
            client.close()

    def rest(
        self, method: str, path: str, body: Any = None, *, text: str | None = None
    ) -> dict[str, Any]:
        """An admin call: its status code and its body (JSON when it parses, else text).

        ``text`` is sent as it is, labelled JSON, as ``pulsar-admin`` sends a bare name (an
        anti-affinity group); ``body`` is encoded as JSON.
        """
        extra: dict[str, Any] = (
            {"json": body}
            if text is None
            else {"data": text.encode(), "headers": {"Content-Type": "application/json"}}
        )
        answer = self.session.request(
            method, self.target.admin_url.rstrip("/") + path, timeout=TIMEOUT_S, **extra
        )
        try:
            payload: Any = answer.json()
        except ValueError:
            payload = answer.text
        return {"status": answer.status_code, "body": payload}

    def ledger(self, ledger_id: int) -> str:
        """Ledger ids are the metadata store's to choose: the first one seen is L0, and so on."""
        return self.ledgers.setdefault(ledger_id, f"L{len(self.ledgers)}")

    def message_id(self, msg_id: pulsar.MessageId) -> dict[str, Any]:
        """A message id with its ledger normalised."""
        return {
            "ledger": self.ledger(msg_id.ledger_id()),
            "entry": msg_id.entry_id(),
            "partition": msg_id.partition(),
            "batch_index": msg_id.batch_index(),
        }

    def position(self, text: str) -> str:
        """``LEDGER:ENTRY`` of internal stats, with the ledger normalised."""
        ledger, _, entry = text.partition(":")
        return f"{self.ledger(int(ledger))}:{entry}" if ledger.lstrip("-").isdigit() else text


def outcome(call: Callable[[], Any]) -> Any:
    """The value of ``call()``, or the name of the client exception it raised."""
    try:
        return call()
    except pulsar.PulsarException as exc:
        return {"raised": type(exc).__name__}


_TIME_KEYS = re.compile(r"(?i:timestamp|time$|^connectedSince$|^duration)|Ms$")
_ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?|localhost:\d+")


def normalise(value: Any, key: str = "") -> Any:
    """Timestamps (by key name), addresses and ports (by shape) replaced by placeholders."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if isinstance(value, str):
        value = _ADDRESS.sub("<address>", value)
        if _TIME_KEYS.search(key) and value:
            return "<time>"
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and _TIME_KEYS.search(key):
        return "<time>" if value > 0 else value
    return value


def shape(value: Any) -> Any:
    """The keys of a JSON document, recursively, with each leaf's JSON type in place of values.

    A list becomes the shape of its first element (stats lists hold one kind of thing).
    """
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return "null"
    return type(value).__name__
