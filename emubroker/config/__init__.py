"""The broker's configuration: one frozen value whose field names are Pulsar's ``broker.conf`` keys.

DESIGN.md decision 3: configuration uses Pulsar's names (camelCase, exactly as in
``broker.conf``/``standalone.conf``) and Pulsar's defaults, so an operator's existing file (or the
subset of it we emulate) loads unchanged. Sources, lowest priority first:

1. the defaults below (Pulsar's, except ``bindAddress``, see its comment);
2. a file: Java properties (``key=value``, ``#``/``!`` comments) or TOML, chosen by extension;
3. environment variables ``PULSAR_PREFIX_<key>=<value>`` (the convention of Pulsar's container
   images, ``apply-config-from-env.py``), applied over the file;
4. explicit overrides (the CLI's flags).

Everything is validated by msgspec in one ``convert`` call. Properties files carry only strings,
so conversion runs with ``strict=False`` (``"6650"`` -> ``6650``, ``"true"`` -> ``True``). An empty
value (``advertisedAddress=``, common in Pulsar's shipped files) means "use the default".

Every source goes through :func:`resolve_keys`, the single place where raw keys are checked: a key
that is a ``BrokerConfig`` field is kept; a key Pulsar knows but we do not emulate
(:data:`~emubroker.config.keys.PULSAR_BROKER_KEYS`) is logged as a warning naming it and dropped,
so a real ``broker.conf`` loads; anything else is a typo and stops start-up with a message naming
the key and where it came from. A bad value stops start-up too, naming the key.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, get_args, get_origin

import msgspec

from emubroker.config.keys import PULSAR_BROKER_KEYS
from emubroker.config.protection import ProtectionConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "SchemaCompatibilityStrategy",
    "env_overrides",
    "load_config",
    "parse_properties",
    "read_config_file",
    "resolve_keys",
    "split_list_values",
]

log = logging.getLogger(__name__)

ENV_PREFIX = "PULSAR_PREFIX_"
"""Environment variables named ``PULSAR_PREFIX_<key>`` set ``<key>`` (Pulsar's container images)."""

SchemaCompatibilityStrategy = Literal[
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
]
"""Pulsar's ``SchemaCompatibilityStrategy`` names, exactly."""

Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
Positive = Annotated[int, msgspec.Meta(gt=0)]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the offending key or file."""


class BrokerConfig(ProtectionConfig, frozen=True, forbid_unknown_fields=True):
    """Broker settings under their ``broker.conf`` names (Pulsar's defaults unless noted).

    Four families of keys live in base classes, each declared once: the limits on what clients
    may cost the broker (connections, pending publishes, topics per namespace, HTTP bodies) in
    :class:`~emubroker.config.protection.ProtectionConfig` (docs/reliability.md); the load
    manager's (``loadBalancer*``, ``loadManagerClassName``, the split algorithms, ``maxUnload*``/
    ``minUnload*``, ...) in :class:`~emubroker.config.loadbalancer.LoadBalancerConfig`
    (docs/load-balancing.md), the base of that; the TLS, authentication and authorization keys
    in :class:`~emubroker.config.security.SecurityConfig`, its base; and the dispatch-throttling
    keys (``dispatchThrottlingRate*``, ``dispatchRateLimiterFactoryClassName``,
    ``preciseDispatcherFlowControl``, ``dispatcherMax/MinReadBatchSize``, ...) in
    :class:`~emubroker.config.throttling.DispatchThrottlingConfig`, the base of that, with
    Pulsar's defaults (spec/pulsar-behaviour.md §7). ``throttling_config_from(config)`` takes
    that part for the throttling code; ``topics.settings.TopicSettings`` is likewise read from
    this struct.

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
        allowAutoSubscriptionCreation: A durable consumer may create a missing subscription
            (dynamic; namespace and topic policies win, ``emubroker.topics.limits``).
        defaultNumPartitions: Partitions of an auto-created partitioned topic.
        defaultNumberOfNamespaceBundles: Bundles of a new namespace.
        dispatcherMaxReadBatchSize: Entries a dispatcher reads from storage at once.
        keepAliveIntervalSeconds: Idle time before the broker pings a client.
        brokerDeduplicationEnabled: Message deduplication for namespaces whose policies do not
            say (``Policies.deduplicationEnabled`` wins when set).
        maxUnackedMessagesPerConsumer: Unacked messages a Shared consumer may hold (0: no limit).
        maxProducersPerTopic: Producers one topic (partition) accepts (0: no limit); a namespace
            or topic policy wins over it (``emubroker.topics.limits``).
        maxConsumersPerTopic: Consumers one topic (partition) accepts (0: no limit).
        maxConsumersPerSubscription: Consumers one Shared, Key_Shared or Failover subscription
            accepts (0: no limit).
        maxSubscriptionsPerTopic: Subscriptions one persistent topic (partition) may have (0: no
            limit).
        ttlDurationDefaultInSeconds: Message TTL of namespaces whose policies set none (0: no
            TTL; ``emubroker.topics.expiry``).
        messageExpiryCheckIntervalInMinutes: Period of the message TTL check.
        backlogQuotaCheckEnabled: Check topics' backlogs against their quotas periodically
            (``emubroker.topics.backlog_quota``).
        backlogQuotaCheckIntervalInSeconds: That check's period.
        backlogQuotaDefaultLimitBytes: The size quota of topics whose policies set none (-1:
            none); ``backlogQuotaDefaultLimitGB`` wins when positive.
        backlogQuotaDefaultLimitGB: The same in GiB (fractions allowed; -1: unset).
        backlogQuotaDefaultLimitSecond: The age quota of topics whose policies set none (-1:
            none).
        backlogQuotaDefaultRetentionPolicy: What exceeding a default quota does.
        managedLedgerMaxEntriesPerLedger: Entries per ledger before a topic rolls over.
        managedLedgerMaxSizePerLedgerMbytes: Bytes (MiB) per ledger before it rolls over.
        managedLedgerMinLedgerRolloverTimeMinutes: No rollover of a younger ledger.
        managedLedgerMaxLedgerRolloverTimeMinutes: Roll over a non-empty ledger this old.
        managedLedgerCacheSizeMB: The broker's entry cache (bookie mode; the in-memory store
            needs none).
        managedLedgerDefaultMarkDeleteRateLimit: Cursor persistence rounds per second.
        statsUpdateFrequencyInSecs: Seconds between topic stats updates (publish rates for
            relative-to-publish-rate dispatch limits).
        delayedDeliveryEnabled: Honour ``deliver_at_time`` on Shared/Key_Shared subscriptions.
        subscriptionKeySharedConsistentHashingReplicaPoints: Key_Shared hash-ring points per
            consumer.
        subscriptionKeySharedUseConsistentHashing: Key_Shared AUTO_SPLIT hashes keys onto a
            ring of consumer points (Pulsar 4's default); false: the hash range is split in
            halves as consumers join (Pulsar's ``HashRangeAutoSplitStickyKeyConsumerSelector``).
        schemaCompatibilityStrategy: The schema compatibility strategy of namespaces whose
            policies leave it ``UNDEFINED``; ``FULL``, Pulsar's default, so that a client
            sees the refusals Pulsar gives (the official client's schema tests rely on them).
            ``UNDEFINED`` here means ``ALWAYS_COMPATIBLE``.
        isAllowAutoUpdateSchemaEnabled: Producers may register new schema versions; when false
            only schemas already registered are accepted.
        isSchemaValidationEnforced: Producers and consumers without a schema are refused on a
            topic that has one.
        topicCompactionRetainNullKey: Compaction keeps messages without a key (Pulsar's default
            drops them).
        activeConsumerFailoverDelayTimeMillis: How long after a Failover subscription's active
            consumer changed its consumers hear ACTIVE_CONSUMER_CHANGE (0: at once).
        acknowledgmentAtBatchIndexLevelEnabled: Keep the acknowledged indexes of a partly
            acknowledged batch (false, Pulsar 4.0's default: such a batch comes back whole).
        metadataStoreSessionTimeoutMillis: The broker's metadata session ends this long after
            its last heartbeat; its ephemeral nodes (bundle ownership, the leader node) go with
            it, so it bounds how long a dead broker keeps them.
        brokerShutdownTimeoutMs: How long a broker stopping on SIGTERM may spend unloading its
            bundles (closing their topics, releasing their ownership) before it stops anyway.
        namespaceBundleUnloadingTimeoutMs: How long one bundle's unload may spend closing its
            topics before its ownership is released anyway.
        emubrokerDispatchTraceDir: Ours, not Pulsar's: a directory where the broker writes the
            dispatch trace (one Parquet row per dispatch, docs/dispatch-trace.md); empty = off.
        emubrokerDispatchTraceFlushRecords: Ours: trace rows buffered per Parquet row group
            (written off the event loop, in a worker thread).
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
    allowAutoSubscriptionCreation: bool = True
    defaultNumPartitions: Positive = 1
    defaultNumberOfNamespaceBundles: Annotated[int, msgspec.Meta(ge=1, le=0xFFFFFFFF)] = 4
    keepAliveIntervalSeconds: Positive = 30
    brokerDeduplicationEnabled: bool = False
    maxUnackedMessagesPerConsumer: Annotated[int, msgspec.Meta(ge=0)] = 50_000
    # Count limits (not dynamic in Pulsar: no @FieldContext(dynamic = true)).
    maxProducersPerTopic: Annotated[int, msgspec.Meta(ge=0)] = 0
    maxConsumersPerTopic: Annotated[int, msgspec.Meta(ge=0)] = 0
    maxConsumersPerSubscription: Annotated[int, msgspec.Meta(ge=0)] = 0
    maxSubscriptionsPerTopic: Annotated[int, msgspec.Meta(ge=0)] = 0
    # Message TTL (neither is dynamic in Pulsar).
    ttlDurationDefaultInSeconds: Annotated[int, msgspec.Meta(ge=0)] = 0
    messageExpiryCheckIntervalInMinutes: Positive = 5
    # Backlog quotas (none is dynamic in Pulsar).
    backlogQuotaCheckEnabled: bool = True
    backlogQuotaCheckIntervalInSeconds: Positive = 60
    backlogQuotaDefaultLimitBytes: int = -1
    backlogQuotaDefaultLimitGB: float = -1.0
    backlogQuotaDefaultLimitSecond: int = -1
    backlogQuotaDefaultRetentionPolicy: Literal[
        "producer_request_hold", "producer_exception", "consumer_backlog_eviction"
    ] = "producer_request_hold"
    managedLedgerMaxEntriesPerLedger: Positive = 50_000
    managedLedgerMaxSizePerLedgerMbytes: Positive = 2048
    managedLedgerMinLedgerRolloverTimeMinutes: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    managedLedgerMaxLedgerRolloverTimeMinutes: Annotated[float, msgspec.Meta(gt=0)] = 240.0
    managedLedgerCacheSizeMB: Positive = 256
    managedLedgerDefaultMarkDeleteRateLimit: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    statsUpdateFrequencyInSecs: Annotated[int, msgspec.Meta(gt=0)] = 60
    delayedDeliveryEnabled: bool = True
    subscriptionKeySharedConsistentHashingReplicaPoints: Positive = 100
    subscriptionKeySharedUseConsistentHashing: bool = True
    schemaCompatibilityStrategy: SchemaCompatibilityStrategy = "FULL"
    isAllowAutoUpdateSchemaEnabled: bool = True
    isSchemaValidationEnforced: bool = False
    topicCompactionRetainNullKey: bool = False
    activeConsumerFailoverDelayTimeMillis: Annotated[int, msgspec.Meta(ge=0)] = 1000
    acknowledgmentAtBatchIndexLevelEnabled: bool = False
    metadataStoreSessionTimeoutMillis: Positive = 30_000
    brokerShutdownTimeoutMs: Annotated[int, msgspec.Meta(ge=0)] = 60_000
    namespaceBundleUnloadingTimeoutMs: Positive = 60_000
    emubrokerDispatchTraceDir: str = ""
    emubrokerDispatchTraceFlushRecords: Positive = 65_536

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


@functools.cache
def _list_keys() -> frozenset[str]:
    # At first use, not at import: msgspec.inspect evaluates BrokerConfig's ~500 annotations
    # (~2 ms), and a broker started with its flags only has no string value to split.
    return frozenset(
        f.name
        for f in msgspec.inspect.type_info(BrokerConfig).fields  # type: ignore[attr-defined]  # a StructType
        if isinstance(f.type, (msgspec.inspect.FrozenSetType, msgspec.inspect.VarTupleType))
    )


def split_list_values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Split the comma-separated string values of list keys, as Pulsar's config loader does.

    ``loadBalancerSheddingExcludedNamespaces=a/b, c/d`` becomes ``["a/b", "c/d"]``; values that
    are already lists (TOML) and keys of other types are returned unchanged.
    """
    return {
        key: [item.strip() for item in value.split(",") if item.strip()]
        if isinstance(value, str) and key in _list_keys()
        else value
        for key, value in raw.items()
    }


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


def read_config_file(path: Path) -> dict[str, Any]:
    """The keys and values of a ``.toml`` or properties file, unchecked.

    Raises:
        ConfigError: The file cannot be read, is not text, or does not parse.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a configuration file: not UTF-8 text (byte {exc.start})"
        ) from None
    if path.suffix.lower() == ".toml":
        import tomllib  # here: most brokers read no TOML, and start-up counts (docs/performance.md)

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return dict(parse_properties(text))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


_ALIASES: Final = {"maxConnectionsPerIp": "brokerMaxConnectionsPerIp"}
"""Names Pulsar does not have but users reach for -> Pulsar's key (which wins when both are
given). Pulsar's connection limit per address is ``brokerMaxConnectionsPerIp``; a plain
``maxConnectionsPerIp`` would otherwise stop start-up as a typo."""


def resolve_keys(raw: Mapping[str, Any], *, source: str = "configuration") -> dict[str, Any]:
    """Check raw keys and drop empty values: the single seam for key policy.

    Args:
        raw: Keys and values from one source.
        source: Where they come from, for messages (a file name, "environment", ...).

    Returns:
        The emulated keys with non-empty values. Keys Pulsar knows but we do not emulate are
        logged as a warning naming them, then dropped.

    Raises:
        ConfigError: A key is neither a ``BrokerConfig`` field nor a Pulsar broker key.
    """
    resolved: dict[str, Any] = {}
    for key, value in raw.items():
        alias_of = _ALIASES.get(key)
        if alias_of is not None:
            log.warning("%s: %r is read as Pulsar's key %r", source, key, alias_of)
            if alias_of not in raw and value != "":
                resolved[alias_of] = value
            continue
        if key not in _KNOWN_KEYS:
            if key in PULSAR_BROKER_KEYS:
                log.warning(
                    "%s: %r is a Pulsar broker setting that emubroker does not emulate; ignored",
                    source,
                    key,
                )
                continue
            raise ConfigError(f"{source}: unknown configuration key {key!r}")
        if value == "":
            continue  # Pulsar's files leave unset keys empty: keep our default
        resolved[key] = value
    return resolved


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``PULSAR_PREFIX_<key>=<value>`` settings of an environment, as ``{key: value}``."""
    return {
        name[len(ENV_PREFIX) :]: value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)
    }


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Build the broker configuration from defaults, a file, the environment and overrides.

    Args:
        path: A ``.toml`` file, or any other extension as Java properties (``broker.conf``).
        overrides: Values that win over everything else (the CLI's flags), by ``broker.conf``
            key; ``None`` values are ignored so callers can pass unset flags through.
        environ: Where ``PULSAR_PREFIX_<key>`` overrides are read (over the file); the process
            environment when ``None``.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: The file cannot be read or parsed, a key is unknown, or a value is invalid.
    """
    raw: dict[str, Any] = {}
    origin: dict[str, str] = {}  # where each key's winning value came from
    env = env_overrides(os.environ if environ is None else environ)
    explicit = {k: v for k, v in (overrides or {}).items() if v is not None}
    sources = [(f"environment ({ENV_PREFIX}<key>)", env), ("command line", explicit)]
    if path is not None:
        sources.insert(0, (str(path), read_config_file(Path(path))))
    for source, values in sources:
        resolved = resolve_keys(values, source=source)
        raw.update(resolved)
        origin.update(dict.fromkeys(resolved, source))
    values = split_list_values(raw)
    try:
        return msgspec.convert(values, BrokerConfig, strict=False)
    except msgspec.ValidationError as exc:
        raise _invalid(values, origin, exc) from exc


@functools.cache
def _field_types() -> dict[str, Any]:
    # Needed to explain a bad value only: not built at import (~1.6 ms).
    return {f.encode_name: f.type for f in msgspec.structs.fields(BrokerConfig)}


def _invalid(
    values: Mapping[str, Any], origin: Mapping[str, str], exc: msgspec.ValidationError
) -> ConfigError:
    """Every bad value, each with its source, key, value and what the key takes.

    msgspec stops at the first bad field, so each value is checked again against its field's
    type alone; a configuration whose values are each fine fails on a combination, which
    ``exc`` names (``__post_init__``).
    """
    problems = []
    for key, value in values.items():
        try:
            msgspec.convert(value, _field_types()[key], strict=False)
        except msgspec.ValidationError as bad:
            problems.append(f"{origin[key]}: {key} = {value!r}: {_expected(key, str(bad))}")
    if not problems:
        return ConfigError(f"invalid configuration: {exc}")
    if len(problems) == 1:
        return ConfigError(f"invalid configuration: {problems[0]}")
    listed = "".join(f"\n  {problem}" for problem in problems)
    return ConfigError(f"invalid configuration, {len(problems)} bad values:{listed}")


def _expected(key: str, message: str) -> str:
    """What ``key`` takes: its choices, or msgspec's ``Expected `int` >= 1`` without the rest."""
    choices = _choices(_field_types()[key])
    if choices:
        return "expected one of " + ", ".join(map(str, choices))
    expected = message.split(" - at `", 1)[0].split(", got `", 1)[0].replace("`", "")
    return expected[:1].lower() + expected[1:]


def _choices(field_type: Any) -> tuple[Any, ...]:
    """The values of the ``Literal`` in a field's type (through ``Annotated``, tuples, unions)."""
    if get_origin(field_type) is Literal:
        return get_args(field_type)
    for inner in get_args(field_type):
        if choices := _choices(inner):
            return choices
    return ()
