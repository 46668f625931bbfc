"""The broker's configuration: one frozen value whose field names are Pulsar's ``broker.conf`` keys.

DESIGN.md decision 3: configuration uses Pulsar's names (camelCase, exactly as in
``broker.conf``/``standalone.conf``) and Pulsar's defaults, so an operator's existing file (or the
subset of it we emulate) loads unchanged. Sources, lowest priority first:

1. the defaults below (Pulsar's, except ``bindAddress``, see its comment);
2. a file: Java properties (``key=value``, ``#``/``!`` comments) or TOML, chosen by extension;
3. explicit overrides (the CLI's flags).

Everything is validated by msgspec in one ``convert`` call. Properties files carry only strings,
so conversion runs with ``strict=False`` (``"6650"`` -> ``6650``, ``"true"`` -> ``True``). An empty
value (``advertisedAddress=``, common in Pulsar's shipped files) means "use the default".

An unknown key stops start-up with a message naming it. Issue 3 adds a list of keys that are known
to Pulsar but not emulated (warn instead of fail) and ``PULSAR_PREFIX_<key>`` environment
overrides; both slot into :func:`resolve_keys` (the single place where raw keys are checked).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "load_config",
    "parse_properties",
    "resolve_keys",
]

Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
Positive = Annotated[int, msgspec.Meta(gt=0)]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the offending key or file."""


class BrokerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Broker settings under their ``broker.conf`` names (Pulsar's defaults unless noted).

    Attributes:
        clusterName: The cluster this broker belongs to (``standalone.conf``'s value).
        brokerServicePort: Port of the binary protocol; ``0`` picks a free one.
        webServicePort: Port of the HTTP admin API; ``0`` picks a free one.
        bindAddress: Interface to bind. Pulsar binds ``0.0.0.0``; a local emulator should not be
            reachable from the network by default, so ours is ``localhost`` (both 127.0.0.1 and
            ::1).
        advertisedAddress: Host name put into lookup answers; unset means 127.0.0.1 for the
            wildcard and loopback binds, else the bind address.
        advertisedListeners: ``name:pulsar://host:port,...``; a LOOKUP naming a listener gets
            that listener's URL, one naming an unknown listener fails (spec §5.2).
        internalListenerName: The listener used when a LOOKUP names none.
        maxMessageSize: Largest message (metadata + payload); announced in CONNECTED.
        allowAutoTopicCreation: Create topics on first use.
        allowAutoTopicCreationType: ``non-partitioned`` or ``partitioned``.
        defaultNumPartitions: Partitions of an auto-created partitioned topic.
        defaultNumberOfNamespaceBundles: Bundles of a new namespace.
        dispatcherMaxReadBatchSize: Entries a dispatcher reads from storage at once.
        keepAliveIntervalSeconds: Idle time before the broker pings a client.
        brokerDeduplicationEnabled: Message deduplication (not emulated yet).
        maxUnackedMessagesPerConsumer: Unacked messages a Shared consumer may hold (0: no limit).
        managedLedgerMaxEntriesPerLedger: Entries per ledger before a topic rolls over.
        delayedDeliveryEnabled: Honour ``deliver_at_time`` on Shared/Key_Shared subscriptions.
        subscriptionKeySharedConsistentHashingReplicaPoints: Key_Shared hash-ring points per
            consumer.
    """

    clusterName: str = "standalone"
    brokerServicePort: Port = 6650
    webServicePort: Port = 8080
    bindAddress: str = "localhost"
    advertisedAddress: str | None = None
    advertisedListeners: str = ""
    internalListenerName: str = ""
    maxMessageSize: Positive = 5 * 1024 * 1024
    allowAutoTopicCreation: bool = True
    allowAutoTopicCreationType: Literal["non-partitioned", "partitioned"] = "non-partitioned"
    defaultNumPartitions: Positive = 1
    defaultNumberOfNamespaceBundles: Annotated[int, msgspec.Meta(ge=1, le=0xFFFFFFFF)] = 4
    dispatcherMaxReadBatchSize: Positive = 100
    keepAliveIntervalSeconds: Positive = 30
    brokerDeduplicationEnabled: bool = False
    maxUnackedMessagesPerConsumer: Annotated[int, msgspec.Meta(ge=0)] = 50_000
    managedLedgerMaxEntriesPerLedger: Positive = 50_000
    delayedDeliveryEnabled: bool = True
    subscriptionKeySharedConsistentHashingReplicaPoints: Positive = 100

    def advertised_host(self) -> str:
        """The host clients are told to connect to (spec §5.2: never one they cannot reach)."""
        if self.advertisedAddress:
            return self.advertisedAddress
        if self.bindAddress in ("localhost", "0.0.0.0", "::", ""):
            return "127.0.0.1"
        return self.bindAddress

    def listeners(self) -> dict[str, str]:
        """``advertisedListeners`` as ``{name: pulsar URL}``, skipping non-``pulsar://`` URLs.

        Raises:
            ConfigError: An entry is not ``name:url``.
        """
        found: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in self.advertisedListeners.split(","))):
            name, sep, url = item.partition(":")
            if not sep or not name or not url:
                raise ConfigError(f"advertisedListeners: expected name:url, got {item!r}")
            if url.startswith("pulsar://"):
                found[name] = url
        return found


_KNOWN_KEYS: frozenset[str] = frozenset(BrokerConfig.__struct_fields__)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text into ``{key: value}`` (strings, whitespace-trimmed).

    Supports ``key=value`` and ``key:value`` separators, ``#`` and ``!`` comment lines and blank
    lines; a later occurrence of a key wins, as in ``java.util.Properties``. Line continuations
    are not used by Pulsar's files and are not supported.

    Raises:
        ConfigError: A non-comment line has no separator.
    """
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigError(f"line {number}: expected key=value, got {line!r}")
        result[line[:cut].strip()] = line[cut + 1 :].strip()
    return result


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return dict(parse_properties(text))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def resolve_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check raw keys and drop empty values: the single seam for key policy.

    Issue 3 adds here: keys Pulsar knows but we do not emulate (logged, then dropped) and
    ``PULSAR_PREFIX_<key>`` environment overrides.

    Raises:
        ConfigError: A key is not a ``BrokerConfig`` field.
    """
    resolved: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _KNOWN_KEYS:
            raise ConfigError(f"unknown configuration key {key!r}")
        if value == "":
            continue  # Pulsar's files leave unset keys empty: keep our default
        resolved[key] = value
    return resolved


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> BrokerConfig:
    """Build the broker configuration from defaults, an optional file and overrides.

    Args:
        path: A ``.toml`` file, or any other extension as Java properties (``broker.conf``).
        overrides: Values that win over the file (the CLI's flags), by ``broker.conf`` key;
            ``None`` values are ignored so callers can pass unset flags through.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: The file cannot be read or parsed, a key is unknown, or a value is invalid.
    """
    raw: dict[str, Any] = {} if path is None else resolve_keys(_read_file(Path(path)))
    raw.update(resolve_keys({k: v for k, v in (overrides or {}).items() if v is not None}))
    try:
        return msgspec.convert(raw, BrokerConfig, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from exc
