"""Before a run: every topic's partitions, learnt as clients learn them, and the declared ones made.

A topic's partition count comes from the broker over the binary protocol
(PARTITIONED_METADATA, `protocol.client.Client.partition_count`), as every Pulsar client asks
before it attaches: a plain `loadgen produce t -u pulsar://host:port` needs no admin URL, as
`pulsar-perf produce` needs none. The admin REST API is used only to create the partitioned
topics a run declares (`-np N`, a scenario's `[[topics]]`) that do not exist yet with that
count, as pulsar-perf uses it; a run that needs it without an admin URL, or whose admin URL
does not answer, says so in one line naming the option.
"""

from __future__ import annotations

from loadgen.control import ADMIN_URL_OPTION, AdminActions, ControlError
from loadgen.scenario import Scenario
from protocol.client import Connector, normalize_topic, open_client
from protocol.clock import Clock
from protocol.errors import PulsarError

__all__ = ["TopicsError", "prepare_topics"]

LOOKUP_TIMEOUT = 10.0
"""Seconds the metadata requests may take (the broker answered a connect a moment ago)."""


class TopicsError(Exception):
    """The topics could not be prepared; the message says why, in one line."""


async def prepare_topics(
    scenario: Scenario,
    service_url: str,
    admin: AdminActions | None,
    *,
    clock: Clock,
    connector: Connector | None = None,
) -> dict[str, int]:
    """Create the declared partitioned topics that are missing; every used topic's partitions.

    Returns:
        Full topic name -> partition count (0: not partitioned), for every topic the
        scenario declares or its producers and consumers use.

    Raises:
        TopicsError: the broker did not answer the metadata requests, a declared topic exists
            with another partition count, or one must be created and the admin REST API is
            not given or does not answer.
    """
    declared = {normalize_topic(t.name): t.partitions for t in scenario.topics}
    used = {normalize_topic(g.topic) for g in scenario.producers}
    used |= {normalize_topic(g.topic) for g in scenario.consumers}
    partitions = await _partition_counts(
        sorted(used | set(declared)), service_url, clock, connector
    )
    for topic, wanted in declared.items():
        count = partitions[topic]
        if wanted and count != wanted:
            if count:
                raise TopicsError(
                    f"{topic} exists with {count} partitions, the run asks for {wanted}"
                )
            await _create(admin, topic, wanted)
            partitions[topic] = wanted
    return partitions


async def _partition_counts(
    topics: list[str], service_url: str, clock: Clock, connector: Connector | None
) -> dict[str, int]:
    counts: dict[str, int] = {}
    failure: Exception | None = None
    try:
        async with open_client(
            service_url, clock=clock, connector=connector, operation_timeout=LOOKUP_TIMEOUT
        ) as client:
            try:
                for topic in topics:
                    counts[topic] = await client.partition_count(topic)
            except (PulsarError, OSError) as exc:  # not raised through the client's task group
                failure = exc
    except ValueError as exc:  # not a pulsar:// URL
        failure = exc
    if failure is not None:
        raise TopicsError(f"asking {service_url} for the topics' partitions failed: {failure}")
    return counts


async def _create(admin: AdminActions | None, topic: str, partitions: int) -> None:
    what = f"creating {topic} with {partitions} partitions"
    if admin is None:
        raise TopicsError(f"{what} needs the admin REST API: give its URL with {ADMIN_URL_OPTION}")
    try:
        await admin.create_partitioned_topic(topic, partitions)
    except ControlError as exc:
        raise TopicsError(f"{what} failed: {exc}") from None
