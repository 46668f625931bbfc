"""Topic auto-creation under the namespace's ``autoTopicCreationOverride`` (``auto_creation``).

The rule alone, then the topic service reading the policies it is given at each decision: the
producer's and consumer's auto-creation (``get_topic``) and PARTITIONED_METADATA's.
"""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.naming import NamespaceName, TopicName
from emubroker.policies import Policies
from emubroker.topics import TopicSettings
from emubroker.topics.auto_creation import AutoTopicCreation, auto_topic_creation
from protocol.errors import TopicNotFoundError
from tests.emubroker.topics.helpers import open_service, topic_name

pytestmark = pytest.mark.anyio

OFF: dict[str, Any] = {"allowAutoTopicCreation": False}
ON: dict[str, Any] = {"allowAutoTopicCreation": True, "topicType": "non-partitioned"}
PARTITIONED_4: dict[str, Any] = {
    "allowAutoTopicCreation": True,
    "topicType": "partitioned",
    "defaultNumPartitions": 4,
}


def with_override(override: dict[str, Any] | None) -> Policies:
    return Policies(autoTopicCreationOverride=override)


class Namespaces:
    """The namespace registry's answers, changed by the test as an admin call would."""

    def __init__(self) -> None:
        self.override: dict[str, Any] | None = None

    def __call__(self, namespace: NamespaceName) -> Policies:
        return with_override(self.override)


# ---- the rule ---------------------------------------------------------------------------------


def test_the_override_wins_over_the_broker_keys_and_its_absence_leaves_them() -> None:
    name = topic_name()
    allowing = TopicSettings(
        allow_auto_topic_creation=True,
        allow_auto_topic_creation_type="partitioned",
        default_num_partitions=2,
    )
    refusing = TopicSettings(allow_auto_topic_creation=False)
    assert auto_topic_creation(name, allowing, with_override(OFF)).allowed is False
    assert auto_topic_creation(name, refusing, with_override(ON)) == AutoTopicCreation(
        True, partitioned=False, partitions=1
    )
    assert auto_topic_creation(name, refusing, with_override(PARTITIONED_4)) == (
        AutoTopicCreation(True, partitioned=True, partitions=4)
    )
    # Unset (or removed): the broker's keys, all three.
    assert auto_topic_creation(name, allowing, with_override(None)) == AutoTopicCreation(
        True, partitioned=True, partitions=2
    )
    assert auto_topic_creation(name, allowing, None) == AutoTopicCreation(True, True, 2)
    assert auto_topic_creation(name, refusing, Policies()).allowed is False


def test_system_topics_are_always_created_and_a_deleted_namespace_creates_nothing() -> None:
    settings = TopicSettings(allow_auto_topic_creation=False)
    for system in (
        "persistent://public/default/__change_events",
        "persistent://public/default/__change_events-partition-0",
        "persistent://public/default/t-sub__transaction_pending_ack",
        "persistent://pulsar/system/anything",
        "persistent://pulsar/127.0.0.1:8080/healthcheck",  # a broker's heartbeat namespace
    ):
        assert auto_topic_creation(TopicName.parse(system), settings, with_override(OFF)).allowed
    deleted = Policies(deleted=True, autoTopicCreationOverride=ON)
    assert not auto_topic_creation(topic_name(), TopicSettings(), deleted).allowed


def test_dead_letter_and_retry_topics_are_never_partitioned() -> None:
    for local in ("t-sub-DLQ", "t-sub-RETRY"):
        rule = auto_topic_creation(topic_name(local), TopicSettings(), with_override(PARTITIONED_4))
        assert (rule.allowed, rule.partitioned) == (True, False)


# ---- the topic service ------------------------------------------------------------------------


async def test_an_override_refusing_creation_refuses_producers_and_partitioned_metadata() -> None:
    namespaces = Namespaces()
    async with open_service(namespace_policies=namespaces) as service:
        namespaces.override = OFF  # the broker allows (Pulsar's default)
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            await service.get_topic(topic_name())
        # Pulsar's ServerCnx: no creation allowed, so the topic must exist.
        with pytest.raises(TopicNotFoundError):
            await service.partitioned_metadata(topic_name())
        assert not service.may_auto_create(topic_name())
        # Topics that exist are not concerned; partitions of a partitioned topic below its count
        # may still be created, never above.
        await service.create_partitioned_topic(topic_name("p"), 2)
        assert await service.partitioned_metadata(topic_name("p")) == 2
        await service.get_topic(topic_name("p-partition-1"))
        assert await service.partitioned_metadata(topic_name("p-partition-1")) == 0
        with pytest.raises(TopicNotFoundError):
            await service.get_topic(topic_name("p-partition-2"))
        with pytest.raises(TopicNotFoundError):
            await service.partitioned_metadata(topic_name("p-partition-2"))
        # The next decision reads the policies again: removed, the broker's key allows.
        namespaces.override = None
        await service.get_topic(topic_name())
        assert await service.partitioned_metadata(topic_name("other")) == 0


async def test_an_override_allowing_creation_beats_the_broker_key() -> None:
    namespaces = Namespaces()
    async with open_service(
        namespace_policies=namespaces, allow_auto_topic_creation=False
    ) as service:
        with pytest.raises(TopicNotFoundError):
            await service.get_topic(topic_name())
        namespaces.override = ON
        assert await service.partitioned_metadata(topic_name()) == 0
        topic = await service.get_topic(topic_name())
        assert topic.name == topic_name()


async def test_the_override_type_and_count_decide_a_partitioned_creation() -> None:
    namespaces = Namespaces()
    async with open_service(namespace_policies=namespaces, default_num_partitions=2) as service:
        namespaces.override = PARTITIONED_4
        assert await service.partitioned_metadata(topic_name("auto")) == 4
        assert service.partitions_of(topic_name("auto")) == 4
        # Without PIP-344's auto-creation nothing is created.
        with pytest.raises(TopicNotFoundError):
            await service.partitioned_metadata(topic_name("asked"), auto_create=False)
        # A dead-letter topic is non-partitioned whatever the type.
        assert await service.partitioned_metadata(topic_name("t-s-DLQ")) == 0
        # A topic made before the override keeps its kind.
        namespaces.override = None
        await service.get_topic(topic_name("plain"))
        namespaces.override = PARTITIONED_4
        assert await service.partitioned_metadata(topic_name("plain")) == 0
        # Removed: the broker's type (non-partitioned) again.
        namespaces.override = None
        assert await service.partitioned_metadata(topic_name("later")) == 0
        assert service.partitions_of(topic_name("later")) == 0
