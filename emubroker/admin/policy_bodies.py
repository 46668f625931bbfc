"""Pulsar's policy value types as REST bodies: their JSON names, defaults and checks.

The namespace and topic policy routes (``routes_namespace_policies``, ``routes_topic_policies``)
decode a body into one of these and store its builtins form, so a value reads back as Pulsar
serializes the class (Jackson, ``NON_NULL``): every field, its default when the body left it
out. The checks raise Pulsar's status and reason (``AdminResource.validatePersistencePolicies``,
``AutoTopicCreationOverrideImpl.validateOverride``, ``NamespacesBase``).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Final

import msgspec

from emubroker.admin.errors import BAD_REQUEST, NOT_ACCEPTABLE, PRECONDITION_FAILED, RestError

__all__ = [
    "OFFLOAD_DEFAULTS",
    "AutoSubscriptionCreationOverride",
    "AutoTopicCreationOverride",
    "BookieAffinityGroupData",
    "DelayedDeliveryPolicies",
    "JavaInt",
    "JavaLong",
    "OffloadPolicies",
    "PersistencePolicies",
    "PublishRate",
    "RetentionPolicies",
    "SubscribeRate",
    "check_auto_topic_creation",
    "check_not_negative",
    "check_persistence",
    "check_retention",
    "jackson_int",
    "offload_policies_shown",
]

JavaInt = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
"""What Jersey accepts for an ``int``/``Integer`` parameter."""

_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")


def jackson_int(value: Any, *, what: str) -> int:
    """A decoded JSON value read as Jackson reads a Java ``int`` with Pulsar's mapper.

    A number (a fraction truncated: ``ACCEPT_FLOAT_AS_INT``), a string holding an integer
    (trimmed: scalar coercion), and null or an empty string as 0 (a primitive's default); a
    boolean, a fraction in a string, an object or an array, or a value outside ``int``'s range
    is a 400.

    Raises:
        RestError: 400 for what Jackson refuses.
    """
    if value is None:
        return 0
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value):
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        if _INT_TEXT.fullmatch(text):
            number = int(text)
    if number is None or not -(2**31) <= number < 2**31:
        raise RestError(BAD_REQUEST, f"Invalid {what}: {value!r} is not a valid int value")
    return number


JavaLong = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""What Jersey accepts for a ``long``/``Long`` parameter."""

PARTITIONED: Final = "partitioned"
NON_PARTITIONED: Final = "non-partitioned"


class AutoTopicCreationOverride(msgspec.Struct):
    """Pulsar's ``AutoTopicCreationOverride``."""

    allowAutoTopicCreation: bool = False
    topicType: str | None = None
    defaultNumPartitions: int | None = None


class AutoSubscriptionCreationOverride(msgspec.Struct):
    """Pulsar's ``AutoSubscriptionCreationOverride``."""

    allowAutoSubscriptionCreation: bool = False


class PersistencePolicies(msgspec.Struct):
    """Pulsar's ``PersistencePolicies``.

    A field the body leaves out reads back as Pulsar 4.0.7 answers it: quorums 2, rate 0.0.
    """

    bookkeeperEnsemble: int = 2
    bookkeeperWriteQuorum: int = 2
    bookkeeperAckQuorum: int = 2
    managedLedgerMaxMarkDeleteRate: float = 0.0
    managedLedgerStorageClassName: str | None = None


class BookieAffinityGroupData(msgspec.Struct):
    """Pulsar's ``BookieAffinityGroupData``."""

    bookkeeperAffinityGroupPrimary: str | None = None
    bookkeeperAffinityGroupSecondary: str | None = None


class RetentionPolicies(msgspec.Struct):
    """Pulsar's ``RetentionPolicies`` (stored and served; retention itself is not emulated)."""

    retention_time_in_minutes: int = msgspec.field(default=0, name="retentionTimeInMinutes")
    retention_size_in_mb: int = msgspec.field(default=0, name="retentionSizeInMB")


def check_retention(retention: RetentionPolicies) -> None:
    """``AdminResource.validateRetentionPolicies``: 400 (Pulsar's ``checkArgument``)."""
    time, size = retention.retention_time_in_minutes, retention.retention_size_in_mb
    if size < -1:
        raise RestError(BAD_REQUEST, "Invalid retention policy: size limit must be >= -1")
    if time < -1:
        raise RestError(BAD_REQUEST, "Invalid retention policy: time limit must be >= -1")
    if (time == 0) != (size == 0):
        raise RestError(
            BAD_REQUEST,
            "Invalid retention policy: Setting a single time or size limit to 0 is invalid when "
            "one of the limits has a non-zero value. Use the value of -1 instead of 0 to ignore a "
            "specific limit. To disable retention both limits must be set to 0.",
        )


class SubscribeRate(msgspec.Struct):
    """Pulsar's ``SubscribeRate``."""

    subscribeThrottlingRatePerConsumer: int = -1
    ratePeriodInSecond: int = 30


class PublishRate(msgspec.Struct):
    """Pulsar's ``PublishRate``."""

    publishThrottlingRateInMsg: int = -1
    publishThrottlingRateInByte: int = -1


class DelayedDeliveryPolicies(msgspec.Struct):
    """Pulsar's ``DelayedDeliveryPolicies``."""

    tickTime: int = 0
    active: bool = False
    maxDeliveryDelayInMillis: int = 0


OFFLOAD_DEFAULTS: Final = {
    # What a new OffloadPoliciesImpl serializes with (Pulsar 4.0.7 standalone's answer).
    "offloadersDirectory": "./offloaders",
    "managedLedgerOffloadMaxThreads": 2,
    "managedLedgerOffloadPrefetchRounds": 1,
    "managedLedgerExtraConfigurations": {},
    "s3ManagedLedgerOffloadMaxBlockSizeInBytes": 64 * 1024 * 1024,
    "s3ManagedLedgerOffloadReadBufferSizeInBytes": 1024 * 1024,
    "s3ManagedLedgerOffloadRoleSessionName": "pulsar-s3-offload",
    "gcsManagedLedgerOffloadMaxBlockSizeInBytes": 128 * 1024 * 1024,
    "gcsManagedLedgerOffloadReadBufferSizeInBytes": 1024 * 1024,
    "s3Driver": False,
    "gcsDriver": False,
    "fileSystemDriver": False,
}


_DRIVER_FLAGS: Final = {
    # OffloadPoliciesImpl's is*Driver getters, which Jackson shows: the driver names of each.
    "s3Driver": ("s3", "aws-s3"),
    "gcsDriver": ("google-cloud-storage",),
    "fileSystemDriver": ("filesystem",),
}


def offload_policies_shown(given: OffloadPolicies) -> dict[str, Any]:
    """The offload policies as Pulsar keeps and shows them.

    The fields given over a new ``OffloadPoliciesImpl``'s defaults, with the driver flags its
    getters derive.
    """
    shown = {**OFFLOAD_DEFAULTS, **msgspec.to_builtins(given)}
    driver = (given.managedLedgerOffloadDriver or "").lower()
    shown.update({flag: driver in names for flag, names in _DRIVER_FLAGS.items()})
    return shown


class OffloadPolicies(msgspec.Struct, omit_defaults=True):
    """Pulsar 4.0.7's ``OffloadPoliciesImpl`` as a body: each field typed, none required.

    Only the types are checked (Jersey's 400); unknown keys are dropped, as Pulsar's Jackson
    does. A field left out is None here: the defaults a new ``OffloadPoliciesImpl`` shows are
    the caller's (``offload_policies_shown``).
    """

    offloadersDirectory: str | None = None
    managedLedgerOffloadDriver: str | None = None
    managedLedgerOffloadMaxThreads: JavaInt | None = None
    managedLedgerOffloadPrefetchRounds: JavaInt | None = None
    managedLedgerOffloadThresholdInSeconds: JavaLong | None = None
    managedLedgerOffloadThresholdInBytes: JavaLong | None = None
    managedLedgerOffloadDeletionLagInMillis: JavaLong | None = None
    managedLedgerOffloadedReadPriority: str | None = None
    managedLedgerExtraConfigurations: dict[str, str] | None = None
    s3ManagedLedgerOffloadRegion: str | None = None
    s3ManagedLedgerOffloadBucket: str | None = None
    s3ManagedLedgerOffloadServiceEndpoint: str | None = None
    s3ManagedLedgerOffloadMaxBlockSizeInBytes: JavaInt | None = None
    s3ManagedLedgerOffloadReadBufferSizeInBytes: JavaInt | None = None
    s3ManagedLedgerOffloadCredentialId: str | None = None
    s3ManagedLedgerOffloadCredentialSecret: str | None = None
    s3ManagedLedgerOffloadRole: str | None = None
    s3ManagedLedgerOffloadRoleSessionName: str | None = None
    gcsManagedLedgerOffloadRegion: str | None = None
    gcsManagedLedgerOffloadBucket: str | None = None
    gcsManagedLedgerOffloadMaxBlockSizeInBytes: JavaInt | None = None
    gcsManagedLedgerOffloadReadBufferSizeInBytes: JavaInt | None = None
    gcsManagedLedgerOffloadServiceAccountKeyFile: str | None = None
    fileSystemProfilePath: str | None = None
    fileSystemURI: str | None = None
    managedLedgerOffloadBucket: str | None = None
    managedLedgerOffloadRegion: str | None = None
    managedLedgerOffloadServiceEndpoint: str | None = None
    managedLedgerOffloadMaxBlockSizeInBytes: JavaInt | None = None
    managedLedgerOffloadReadBufferSizeInBytes: JavaInt | None = None


def check_not_negative(value: int | None, reason: str) -> None:
    """412 ``reason`` for a negative value (Pulsar's "... must be 0 or more" checks)."""
    if value is not None and value < 0:
        raise RestError(PRECONDITION_FAILED, reason)


def check_auto_topic_creation(value: AutoTopicCreationOverride, max_partitions: int) -> None:
    """``AutoTopicCreationOverrideImpl.validateOverride`` (412), then the partition limit (406)."""
    detail: str | None = None
    if value.allowAutoTopicCreation:
        if value.topicType not in (PARTITIONED, NON_PARTITIONED):
            detail = f"Unknown topic type [{value.topicType}]"
        elif value.topicType == PARTITIONED:
            if value.defaultNumPartitions is None:
                detail = "[defaultNumPartitions] cannot be null when the type is partitioned."
            elif value.defaultNumPartitions <= 0:
                detail = "[defaultNumPartitions] cannot be less than 1 for partition type."
        elif value.defaultNumPartitions is not None:
            detail = (
                "[defaultNumPartitions] is not allowed to be set when the type is non-partition."
            )
    if detail is not None:
        raise RestError(
            PRECONDITION_FAILED,
            f"Invalid configuration for autoTopicCreationOverride. the detail is {detail}",
        )
    if (
        value.topicType == PARTITIONED
        and max_partitions > 0
        and (value.defaultNumPartitions or 0) > max_partitions
    ):
        raise RestError(
            NOT_ACCEPTABLE, f"Number of partitions should be less than or equal to {max_partitions}"
        )


MAX_QUORUM: Final = 5
"""Pulsar's default ``managedLedgerMax{EnsembleSize,WriteQuorum,AckQuorum}``: there are no
bookies here, so those keys are accepted and ignored and the checks use Pulsar's defaults."""


def check_persistence(value: PersistencePolicies) -> None:
    """``AdminResource.validatePersistencePolicies``: 400 (Pulsar's ``checkArgument``)."""
    ensemble, write = value.bookkeeperEnsemble, value.bookkeeperWriteQuorum
    ack = value.bookkeeperAckQuorum
    limits = (
        ("Bookkeeper-Ensemble", ensemble),
        ("Bookkeeper-WriteQuorum", write),
        ("Bookkeeper-AckQuorum", ack),
    )
    for what, number in limits:
        if not 0 < number <= MAX_QUORUM:
            raise RestError(BAD_REQUEST, f"{what} must be <= {MAX_QUORUM} and > 0.")
    if not ensemble >= write >= ack:
        raise RestError(
            BAD_REQUEST,
            f"Bookkeeper Ensemble ({ensemble}) >= WriteQuorum ({write}) >= AckQuorum ({ack})",
        )
