"""From a scenario to one `WorkerPlan` per worker (pure: the runner gives it the partitions).

Producers and consumers are dealt round robin over the workers, consumers and producers
alternating (c0, p0, c1, p1, ...), so that with two workers one producer and one consumer run
in different processes. A group's rate (and message limit) is split evenly among its
producers; each producer gets a producer index per partition, unique in the run, and a seed
derived from the scenario's seed and that index.
"""

from __future__ import annotations

import itertools

import msgspec

from loadgen.messages import ConsumerPlan, ProducerPlan, WorkerPlan
from loadgen.scenario import Scenario, segments_for
from loadgen.schedule import Segment, producer_seed
from protocol.client import normalize_topic

__all__ = ["ActorInfo", "RunPlans", "build_plans"]


class ActorInfo(msgspec.Struct, frozen=True):
    """A producer partition or a consumer, as the manifest lists it."""

    role: str
    group: str
    name: str
    topic: str
    worker: int
    producer_index: int | None = None
    partition: int = -1


class RunPlans(msgspec.Struct, frozen=True):
    workers: list[WorkerPlan]
    actors: list[ActorInfo]
    producer_names: dict[int, str]


def _share(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


def _scaled(segments: list[Segment], parts: int) -> list[Segment]:
    return [
        Segment(s.start, s.duration, s.rate_from / parts, s.rate_to / parts, s.phase)
        for s in segments
    ]


def build_plans(
    scenario: Scenario,
    *,
    run_id: str,
    workers: int,
    service_url: str,
    client: str,
    trace_dir: str,
    trace_sample: float,
    partitions: dict[str, int],
) -> RunPlans:
    """Deal the scenario's producers and consumers to `workers` plans.

    Args:
        scenario: the checked scenario.
        run_id: names producers and goes into every plan.
        workers: how many worker processes.
        service_url: where the workers' clients connect.
        client: `native` or `official`.
        trace_dir: the run directory.
        trace_sample: fraction of messages traced.
        partitions: full topic name -> partition count (0 or missing: not partitioned).
    """

    def names(topic: str) -> tuple[list[str], bool]:
        full = normalize_topic(topic)
        count = partitions.get(full, 0)
        if count:
            return [f"{full}-partition-{i}" for i in range(count)], True
        return [full], False

    producers: list[ProducerPlan] = []
    next_index = 0
    for group in scenario.producers:
        topics, partitioned = names(group.topic)
        segments = _scaled(segments_for(scenario, group), group.count)
        for i in range(group.count):
            limit = _share(group.messages, group.count, i) if group.messages else -1
            producers.append(
                ProducerPlan(
                    group=group.name,
                    name=f"{group.name}-{i}-{run_id}",
                    topic=normalize_topic(group.topic),
                    partitions=topics,
                    partitioned=partitioned,
                    first_index=next_index,
                    segments=segments,
                    seed=producer_seed(scenario.seed, next_index),
                    size=group.size,
                    keys=group.keys,
                    batching=group.batching,
                    max_outstanding=group.max_outstanding,
                    messages=limit,
                    poisson=group.arrivals == "poisson",
                    send_timeout=float(group.send_timeout),
                    chunking=group.chunking,
                )
            )
            next_index += len(topics)
    consumers: list[ConsumerPlan] = []
    for cgroup in scenario.consumers:
        topics, partitioned = names(cgroup.topic)
        for i in range(cgroup.count):
            consumers.append(
                ConsumerPlan(
                    group=cgroup.name,
                    name=f"{cgroup.name}-{i}",
                    topic=normalize_topic(cgroup.topic),
                    partitions=topics,
                    partitioned=partitioned,
                    subscription=cgroup.subscription,
                    sub_type=cgroup.type,
                    receiver_queue=cgroup.receiver_queue,
                    ack_rate=cgroup.ack_rate / cgroup.count,
                    initial_position=cgroup.initial_position,
                )
            )
    producer_names = {
        p.first_index + offset: p.name for p in producers for offset in range(len(p.partitions))
    }
    dealt: list[tuple[list[ProducerPlan], list[ConsumerPlan]]] = [([], []) for _ in range(workers)]
    actors: list[ActorInfo] = []
    order = itertools.chain.from_iterable(itertools.zip_longest(consumers, producers))
    for slot, plan in enumerate(item for item in order if item is not None):
        worker = slot % workers
        if isinstance(plan, ProducerPlan):
            dealt[worker][0].append(plan)
            for offset, topic in enumerate(plan.partitions):
                actors.append(
                    ActorInfo(
                        "produce",
                        plan.group,
                        plan.name,
                        topic,
                        worker,
                        plan.first_index + offset,
                        offset if plan.partitioned else -1,
                    )
                )
        else:
            dealt[worker][1].append(plan)
            actors.append(ActorInfo("consume", plan.group, plan.name, plan.topic, worker))
    plans = [
        WorkerPlan(
            run_id=run_id,
            worker=index,
            service_url=service_url,
            client="official" if client == "official" else "native",
            trace_dir=trace_dir,
            trace_sample=trace_sample,
            producers=mine[0],
            consumers=mine[1],
            producer_names=producer_names,
        )
        for index, mine in enumerate(dealt)
    ]
    return RunPlans(workers=plans, actors=actors, producer_names=producer_names)
