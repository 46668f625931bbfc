"""Whether a missing topic is created at its first use, and as what.

As Pulsar's ``BrokerService`` decides it (``isAllowAutoTopicCreationAsync``,
``isDefaultTopicTypePartitioned``, ``getDefaultNumPartitions``), for a name that is not a
partitioned topic:

1. Nothing is created in a namespace whose policies say ``deleted`` (being deleted).
2. A system topic (``emubroker.system_names.is_system_topic``: any topic of ``pulsar/system``
   or of a broker's heartbeat namespace, ``__change_events`` anywhere...) is always created, as
   Pulsar's ``systemTopicEnabled`` (true by default; not a key here) has it.
3. The namespace's ``autoTopicCreationOverride``, when set, decides alone: its
   ``allowAutoTopicCreation``, ``topicType`` and ``defaultNumPartitions``; the broker's keys are
   not read. Once removed, the broker's ``allowAutoTopicCreation``,
   ``allowAutoTopicCreationType`` and ``defaultNumPartitions`` decide again.
4. A partition of a partitioned topic may be created below its count and never above, whatever
   1-3 say; a partition-like name without a partitioned topic is a name like any other.
5. Dead-letter and retry topics (``-DLQ``, ``-RETRY``) are non-partitioned whatever the type.

The policies are read at each decision from the namespace registry, which the metadata watch keeps
current whichever broker wrote them, so a change applies to the next lookup, producer or consumer
of a topic not created yet, on every broker, without a restart. Topics that exist keep their kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.system_names import is_system_topic

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from emubroker.naming import NamespaceName, TopicName
    from emubroker.policies import Policies
    from emubroker.topics.settings import TopicSettings

__all__ = ["AutoCreationRules", "AutoTopicCreation", "auto_topic_creation"]

PARTITIONED: Final = "partitioned"
# RetryMessageUtil's suffixes: the client makes these topics, always non-partitioned (rule 5).
_NEVER_PARTITIONED: Final = ("-DLQ", "-RETRY")


class AutoTopicCreation(msgspec.Struct, frozen=True):
    """What a missing topic's first use may create.

    Attributes:
        allowed: Whether it may be created at all.
        partitioned: Whether PARTITIONED_METADATA creates it as a partitioned topic.
        partitions: How many partitions it gets then.
    """

    allowed: bool
    partitioned: bool = False
    partitions: int = 1


def _override(policies: Policies | None) -> Mapping[str, object] | None:
    value = None if policies is None else policies.autoTopicCreationOverride
    return value if isinstance(value, dict) else None


def auto_topic_creation(
    name: TopicName, settings: TopicSettings, policies: Policies | None
) -> AutoTopicCreation:
    """Rules 1-3 and 5 for ``name`` (rule 4 is its caller's: it knows the partitioned topics).

    Args:
        name: The topic (a partition: its partitioned topic's name decides the type).
        settings: The broker's settings now.
        policies: Its namespace's policies; None: none (the broker's keys decide).
    """
    override = _override(policies)
    if override is not None:
        # Stored as Pulsar's JSON: a missing flag is Java's false; a partitioned override was
        # checked for a positive count when set (AutoTopicCreationOverrideImpl.validateOverride).
        allowed = override.get("allowAutoTopicCreation") is True
        partitioned = override.get("topicType") == PARTITIONED
        count = override.get("defaultNumPartitions")
        partitions = count if isinstance(count, int) and count > 0 else 1
    else:
        allowed = settings.allow_auto_topic_creation
        partitioned = settings.allow_auto_topic_creation_type == PARTITIONED
        partitions = settings.default_num_partitions
    if policies is not None and policies.deleted:
        allowed = False
    elif is_system_topic(name):
        allowed = True
    if name.partitioned_topic_name.local_name.endswith(_NEVER_PARTITIONED):
        partitioned = False
    return AutoTopicCreation(allowed, partitioned, partitions)


class AutoCreationRules:
    """:func:`auto_topic_creation` with the live settings and the namespace registry.

    Args:
        settings: The broker's settings now (dynamic configuration).
        namespace_policies: A namespace's policies now; None: none, the broker's keys decide.
    """

    def __init__(
        self,
        settings: Callable[[], TopicSettings],
        namespace_policies: Callable[[NamespaceName], Policies | None] | None = None,
    ) -> None:
        self._settings = settings
        self._policies = namespace_policies

    def __call__(self, name: TopicName) -> AutoTopicCreation:
        lookup = self._policies
        policies = None if lookup is None else lookup(name.namespace)
        return auto_topic_creation(name, self._settings(), policies)
