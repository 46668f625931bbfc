"""The events of a scenario, carried out inside the simulated cluster (``ClusterControl``'s parts).

loadgen fires a scenario's events through ``loadgen.control.ClusterControl``; against real
processes its parts are the admin REST API, ``emubroker cluster``'s supervisor and the stub's
socket. A simulation has no sockets, so its parts do the same things in this process:

- :class:`SimulatedProcesses`: ``kill_broker`` (``signal = "KILL"``: a crash, its metadata
  session timing out on the cluster's clock; ``"TERM"``: a graceful stop) and
  ``restart_broker`` (:mod:`emubroker.simulate.cluster`);
- :class:`SimulatedStubFaults`: the stub's fault injection, through a local client;
- :class:`SimulatedAdmin`: what the admin endpoints do, done directly on the brokers: unloads
  at the bundle's owner (a destination broker through the leader's affinity, as the leader's
  endpoint does), splits at the owner, dispatch-rate policies and dynamic configuration in the
  metadata store, which every broker watches.

A broker named by an event that is not running, or an unknown namespace or bundle, is the
event's error (``outcome = "error"`` in the events table), as the REST answer would be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from emubroker.admin.errors import RestError
from emubroker.admin.routes_unload import namespace_bundle, namespace_bundles
from emubroker.dynamic_config import DynamicConfigError
from emubroker.naming import InvalidNameError, NamespaceName, TopicName
from emubroker.policies import SubscriptionPolicies, TopicPolicies
from emubroker.ratelimit.quotas import InvalidDispatchRateError, decode_dispatch_rate
from emubroker.simulate.cluster import BrokerDownError, UnknownBrokerError
from loadgen.control import ControlError
from protocol.client import normalize_topic
from storage_stub.faults import FaultConfig

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.app import Broker
    from emubroker.naming import NamespaceBundle
    from emubroker.simulate.cluster import SimulatedCluster
    from loadgen.events import SetDispatchRate, SplitBundle
    from storage_stub.client import StubClient

__all__ = ["SimulatedAdmin", "SimulatedProcesses", "SimulatedStubFaults"]


class SimulatedProcesses:
    """``BrokerProcesses``: kill, stop and restart the simulated brokers."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster

    async def kill(self, broker: int | str, signal_name: str) -> str:
        index = _index(broker)
        try:
            if signal_name == "TERM":
                await self._cluster.stop(index)
            else:
                await self._cluster.kill(index)
        except (BrokerDownError, UnknownBrokerError) as exc:
            raise ControlError(str(exc)) from None
        return f"broker-{index} stopped by SIG{signal_name}"

    async def restart(self, broker: int | str) -> str:
        index = _index(broker)
        try:
            await self._cluster.start(index)
        except (BrokerDownError, UnknownBrokerError) as exc:
            raise ControlError(str(exc)) from None
        return f"broker-{index} started"


def _index(broker: int | str) -> int:
    if isinstance(broker, str):  # "stub": refused before the run (scenario checks)
        raise ControlError(f"a simulation cannot kill or restart {broker!r}")
    return broker


class SimulatedStubFaults:
    """``StubFaultControl``: the bookie stub's fault injection, through a local client."""

    def __init__(self, client: StubClient) -> None:
        self._client = client

    async def configure(self, config: dict[str, Any]) -> str:
        try:
            faults = msgspec.convert(config, FaultConfig)
        except msgspec.ValidationError as exc:
            raise ValueError(f"bad stub fault config: {exc}") from None
        await self._client.configure_faults(faults)
        return "configured"

    async def fail_next(self, count: int, ops: list[str] | None) -> str:
        await self._client.fail_next(count, ops)
        return f"next {count} requests fail"

    async def stall(self, seconds: float) -> str:
        await self._client.stall(seconds)
        return f"stalled {seconds:g} s"

    async def clear(self) -> str:
        await self._client.clear_faults()
        return "cleared"


class SimulatedAdmin:
    """``AdminActions``: what the admin endpoints do, on the simulated brokers directly."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster

    def _any(self) -> tuple[Broker, AdminContext]:
        for broker in self._cluster.brokers:
            if broker.admin is not None:
                return broker, broker.admin
        raise ControlError("no broker is running")

    async def _owner(self, bundle: NamespaceBundle) -> Broker | None:
        _, ctx = self._any()
        owner = await ctx.ownership.get_owner(bundle)
        if owner is None:
            return None
        for broker in self._cluster.brokers:
            if broker.ownership.me == owner.broker:
                return broker
        raise ControlError(f"{bundle} is owned by {owner.broker}, which is not running")

    async def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        broker, _ = self._any()
        await broker.topics.create_partitioned_topic(TopicName.parse(topic), partitions)
        return "created"

    async def unload_topic(self, topic: str) -> str:
        broker, _ = self._any()
        name = _topic(topic)
        count = await broker.topics.partitioned_metadata(name)
        names = [name.partition(i) for i in range(count)] or [name]
        for each in names:
            owner = await self._owner(broker.ownership.bundle_of(each))
            if owner is not None:
                await owner.topics.unload(each)
        return f"unloaded {len(names)} topic(s)"

    async def unload_namespace(self, namespace: str) -> str:
        _, ctx = self._any()
        try:
            bundles = await namespace_bundles(ctx, _namespace(namespace))
        except RestError as exc:
            raise ControlError(exc.reason) from None
        for bundle in bundles:
            await self._unload(bundle)
        return "unloaded"

    async def unload_bundle(self, namespace: str, bundle: str, destination: str | None) -> str:
        _, ctx = self._any()
        try:
            found = await namespace_bundle(ctx, _namespace(namespace), bundle)
        except RestError as exc:
            raise ControlError(exc.reason) from None
        if destination:
            self._leader_affinity(found, destination)
        await self._unload(
            found, (destination or "").removeprefix("http://").removeprefix("https://")
        )
        return "unloaded"

    def _leader_affinity(self, bundle: NamespaceBundle, destination: str) -> None:
        destination = destination.removeprefix("http://").removeprefix("https://")
        for broker in self._cluster.brokers:
            leading = broker.leader_election is not None and broker.leader_election.is_leader()
            if leading and broker.lookup is not None:
                broker.lookup.selector.set_affinity(bundle.bundle_range.name, destination)
                return
        raise ControlError("The current leader is empty.")

    async def _unload(self, bundle: NamespaceBundle, destination: str = "") -> None:
        owner = await self._owner(bundle)
        if owner is not None and owner.unloader is not None:
            await owner.unloader.unload(bundle, reason="admin", destination=destination)

    async def split_bundle(self, event: SplitBundle) -> str:
        _, ctx = self._any()
        try:
            bundle = await namespace_bundle(ctx, _namespace(event.namespace), event.bundle)
        except RestError as exc:
            raise ControlError(exc.reason) from None
        owner = await self._owner(bundle)
        if owner is None or owner.admin is None or owner.admin.bundle_splitter is None:
            raise ControlError(f"{bundle} is not owned by any broker")
        try:
            await owner.admin.bundle_splitter.split(
                bundle, event.algorithm, positions=event.boundaries, unload=event.unload
            )
        except ValueError as exc:
            raise ControlError(str(exc)) from None
        return "split"

    async def set_dispatch_rate(self, event: SetDispatchRate) -> str:
        _, ctx = self._any()
        body = msgspec.json.encode(
            {
                "dispatchThrottlingRateInMsg": event.msg_rate,
                "dispatchThrottlingRateInByte": event.byte_rate,
                "ratePeriodInSecond": event.period_s,
                "relativeToPublishRate": event.relative_to_publish_rate,
            }
        )
        try:
            rate = decode_dispatch_rate(body)
        except InvalidDispatchRateError as exc:
            raise ControlError(str(exc)) from None
        if event.scope in ("namespace", "namespace_subscription"):
            fields = (
                ("topicDispatchRate", "clusterDispatchRate")
                if event.scope == "namespace"
                else ("subscriptionDispatchRate",)
            )
            await _set_namespace_rate(ctx, _namespace(event.target), fields, rate)
        else:
            await _set_topic_rate(ctx, event, rate)
        return f"{event.scope} dispatch rate {event.msg_rate} msg/{event.period_s}s"

    async def set_dynamic_config(self, key: str, value: str) -> str:
        _, ctx = self._any()
        try:
            await ctx.dynamic.update(key, value)
        except DynamicConfigError as exc:
            raise ControlError(str(exc)) from None
        return f"{key}={value}"


async def _set_namespace_rate(
    ctx: AdminContext, namespace: NamespaceName, fields: tuple[str, ...], rate: Any
) -> None:
    # As the namespace endpoint: this cluster's entry of each policy map (the namespace's
    # per-topic rate goes to the legacy clusterDispatchRate map too, as in Pulsar).
    if await ctx.policies.get_namespace(namespace) is None:
        raise ControlError(f"namespace {namespace} does not exist")
    value = msgspec.to_builtins(rate)

    def change(old: Any) -> Any:
        updates = {field: {**getattr(old, field), ctx.cluster: value} for field in fields}
        return msgspec.structs.replace(old, **updates)

    policies = await ctx.policies.update_namespace(namespace, change)
    ctx.namespaces.apply(namespace, policies)


async def _set_topic_rate(ctx: AdminContext, event: SetDispatchRate, rate: Any) -> None:
    name = _topic(event.target)
    throttling = ctx.topics.throttling
    if throttling is None:
        raise ControlError("dispatch throttling is not enabled on this broker")
    current = throttling.topic_policies(name) or TopicPolicies()
    if event.scope == "subscription":
        if not event.subscription:
            raise ControlError("scope = 'subscription' needs a subscription")
        subscriptions = {
            **current.subscriptionPolicies,
            event.subscription: SubscriptionPolicies(dispatchRate=rate),
        }
        updated = msgspec.structs.replace(current, subscriptionPolicies=subscriptions)
    else:
        level = "dispatchRate" if event.scope == "topic" else "subscriptionDispatchRate"
        updated = msgspec.structs.replace(current, **{level: rate})
    await throttling.store_topic_policies(name, updated)


def _namespace(text: str) -> NamespaceName:
    try:
        return NamespaceName.parse(text)
    except InvalidNameError as exc:
        raise ControlError(str(exc)) from None


def _topic(text: str) -> TopicName:
    try:
        return TopicName.parse(normalize_topic(text))
    except InvalidNameError as exc:
        raise ControlError(str(exc)) from None
