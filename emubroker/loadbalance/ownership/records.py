"""Bundle ownership's records: where a broker is reached, who owns a bundle, the lock node's JSON.

The node ``/namespace/<tenant>/<ns>/<0xlower_0xupper>`` holds Pulsar's
``NamespaceEphemeralData`` (spec/pulsar-behaviour.md §3.1); ``table`` writes and reads it.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "BrokerInfo",
    "BundleOwner",
    "NamespaceEphemeralData",
    "owner_from_record",
    "ownership_record",
]


class BrokerInfo(msgspec.Struct, frozen=True):
    """Where a broker is reached.

    Attributes:
        service_url: ``pulsar://host:port`` of its binary protocol.
        http_url: ``http://host:port`` of its admin API.
        service_url_tls: ``pulsar+ssl://host:port``; empty without a TLS port.
        http_url_tls: ``https://host:port``; empty without an HTTPS port.
    """

    service_url: str
    http_url: str
    service_url_tls: str = ""
    http_url_tls: str = ""


class BundleOwner(msgspec.Struct, frozen=True):
    """Who owns a bundle, and whether it is being unloaded (``disabled``)."""

    broker: BrokerInfo
    disabled: bool = False


class NamespaceEphemeralData(msgspec.Struct, frozen=True, rename="camel"):
    """Pulsar's ownership record (``NamespaceEphemeralData``), stored as JSON in the lock node."""

    native_url: str
    native_url_tls: str = ""
    http_url: str = ""
    http_url_tls: str = ""
    disabled: bool = False
    advertised_listeners: dict[str, str] = msgspec.field(default_factory=dict)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(NamespaceEphemeralData)


def owner_from_record(value: bytes) -> BundleOwner:
    """Who owns a bundle, from its lock node's value."""
    record = _DECODER.decode(value)
    broker = BrokerInfo(
        record.native_url, record.http_url, record.native_url_tls, record.http_url_tls
    )
    return BundleOwner(broker, record.disabled)


def ownership_record(broker: BrokerInfo) -> bytes:
    """The lock node's value for bundles ``broker`` owns (active: ``disabled`` false)."""
    return _ENCODER.encode(
        NamespaceEphemeralData(
            native_url=broker.service_url,
            native_url_tls=broker.service_url_tls,
            http_url=broker.http_url,
            http_url_tls=broker.http_url_tls,
        )
    )
