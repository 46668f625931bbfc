"""The broker's topic domain: topics, producers, subscriptions, dispatch (no I/O of its own).

The network layer reaches everything through :class:`TopicService` and the handles it returns
(:class:`TopicHandle` for a topic of either kind); frames go out through the
:mod:`~emubroker.topics.sinks` protocols the session implements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.consumer import Consumer
from emubroker.topics.entry import EntryInfo, entry_info_from_metadata
from emubroker.topics.handles import ConsumerHandle, SubscriptionView, TopicHandle
from emubroker.topics.nonpersistent import NonPersistentConsumer, NonPersistentTopic
from emubroker.topics.producer import ProducerHandle
from emubroker.topics.requests import ProducerRequest, SubscribeRequest
from emubroker.topics.service import TopicService
from emubroker.topics.settings import TopicSettings
from emubroker.topics.sinks import ConsumerSink, ProducerSink
from emubroker.topics.stats import ServiceStats, SubscriptionStats, TopicStats
from emubroker.topics.topic import Topic

__all__ = [
    "Consumer",
    "ConsumerHandle",
    "ConsumerSink",
    "EntryInfo",
    "NonPersistentConsumer",
    "NonPersistentTopic",
    "ProducerHandle",
    "ProducerRequest",
    "ProducerSink",
    "ServiceStats",
    "SubscribeRequest",
    "SubscriptionStats",
    "SubscriptionView",
    "Topic",
    "TopicHandle",
    "TopicService",
    "TopicSettings",
    "TopicStats",
    "entry_info_from_metadata",
]

if TYPE_CHECKING:
    # Static proof that both kinds are the handles' Protocols (checked by mypy, free at runtime).
    def _consumer_handles(
        persistent: Consumer, nonpersistent: NonPersistentConsumer
    ) -> tuple[ConsumerHandle, ConsumerHandle]:
        return persistent, nonpersistent

    def _topic_handles(
        persistent: Topic, nonpersistent: NonPersistentTopic
    ) -> tuple[TopicHandle, TopicHandle]:
        return persistent, nonpersistent
