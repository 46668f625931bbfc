"""The seam between a scenario's events and whatever runs the cluster.

`ClusterControl.apply(event)` carries out one event and returns what the cluster answered. It
reaches the cluster three ways, each behind a small interface:

* `AdminActions`: what the admin API does (unloads, bundle split, dispatch-rate policies,
  dynamic config, partitioned topics). `AdminRest` calls Pulsar's admin REST v2 paths, against
  any Pulsar or emubroker admin URL; `emubroker simulate` has its own, in its process.
* `BrokerProcesses`: kill and restart a broker, or the storage-stub (`broker = "stub"`). Only
  a cluster loadgen started has it (`loadgen.local`); an `emubroker cluster` plugs in here.
* `StubFaultControl`: the bookie stub's fault injection, reached over the stub's own control
  requests when loadgen started the stub.

Events that need a missing part fail with a clear error (and the scenario check refuses most of
them before the run starts).
"""

from __future__ import annotations

from typing import Any, Protocol

import aiohttp
import msgspec

from emubroker.adminclient import AdminHttpError, AdminUnreachableError, AsyncAdminClient
from emubroker.adminclient.paths import dispatch_rate_path
from emubroker.adminclient.paths import path as admin_path
from loadgen.events import (
    Event,
    KillBroker,
    RestartBroker,
    SetDispatchRate,
    SetDynamicConfig,
    SplitBundle,
    StubClear,
    StubFailNext,
    StubFaults,
    StubStall,
    UnloadBundle,
    UnloadNamespace,
    UnloadTopic,
)
from protocol.client import normalize_topic

__all__ = [
    "ADMIN_URL_OPTION",
    "AdminActions",
    "AdminRest",
    "BrokerInfo",
    "BrokerProcesses",
    "ClusterControl",
    "ClusterLayout",
    "ControlError",
    "StubFaultControl",
]


class ControlError(Exception):
    """An event could not be carried out; the message says what the cluster answered."""


ADMIN_URL_OPTION = "--admin-url (in a scenario: cluster.admin_url)"
"""Where a user gives the admin REST API's URL, for the messages that need it."""


class BrokerInfo(msgspec.Struct, frozen=True):
    name: str
    service_url: str
    admin_url: str


class ClusterLayout(msgspec.Struct, frozen=True):
    """Where the cluster is; written to the run's manifest."""

    service_url: str
    admin_url: str | None
    brokers: list[BrokerInfo] = []
    stub_url: str | None = None
    started_by_loadgen: bool = False
    storage: str | None = None


class AdminActions(Protocol):
    """What the admin REST API does for events (`AdminRest`; the simulator's in-process one)."""

    async def create_partitioned_topic(self, topic: str, partitions: int) -> str: ...
    async def unload_topic(self, topic: str) -> str: ...
    async def unload_namespace(self, namespace: str) -> str: ...
    async def unload_bundle(self, namespace: str, bundle: str, destination: str | None) -> str: ...
    async def split_bundle(self, event: SplitBundle) -> str: ...
    async def set_dispatch_rate(self, event: SetDispatchRate) -> str: ...
    async def set_dynamic_config(self, key: str, value: str) -> str: ...


class BrokerProcesses(Protocol):
    """Broker processes loadgen controls (kill, restart)."""

    async def kill(self, broker: int | str, signal_name: str) -> str: ...
    async def restart(self, broker: int | str) -> str: ...


class StubFaultControl(Protocol):
    """The bookie stub's fault injection."""

    async def configure(self, config: dict[str, Any]) -> str: ...
    async def fail_next(self, count: int, ops: list[str] | None) -> str: ...
    async def stall(self, seconds: float) -> str: ...
    async def clear(self) -> str: ...


class AdminRest:
    """Pulsar's admin REST v2, as `pulsar-admin` calls it (`emubroker.adminclient`'s paths).

    Args:
        admin_url: `http://host:port` of any broker's admin API.
        session: the aiohttp session to use (the caller owns it).
        timeout: seconds per request.
    """

    def __init__(
        self, admin_url: str, session: aiohttp.ClientSession, *, timeout: float = 30.0
    ) -> None:
        self.admin_url = admin_url.rstrip("/")
        self._client = AsyncAdminClient(
            self.admin_url, session, timeout=aiohttp.ClientTimeout(total=timeout)
        )

    async def request(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        """One request to `path` (from `emubroker.adminclient.paths`); the JSON answer.

        Raises:
            ControlError: a status >= 400 or no answer; the message has the status and reason.
        """
        try:
            return await self._client.request(method, path, body, params)
        except AdminHttpError as exc:
            raise ControlError(str(exc)) from None
        except AdminUnreachableError as exc:
            if isinstance(exc.__cause__, aiohttp.ClientConnectorError):  # nothing listens there
                raise ControlError(
                    f"no admin REST API answers at {self.admin_url} ({exc}); "
                    f"give the cluster's with {ADMIN_URL_OPTION}"
                ) from None
            raise ControlError(str(exc)) from None

    async def partitions(self, topic: str) -> int:
        """The topic's partition count (0 when not partitioned).

        Raises:
            ControlError: the topic does not exist (HTTP 404, as Pulsar answers and its admin
                client raises NotFound), or the broker refused.
        """
        answer = await self.request("GET", admin_path("topic.partitions", topic=_full(topic)))
        return int(answer.get("partitions", 0)) if isinstance(answer, dict) else 0

    async def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        """Create it; an existing topic with the same count is fine.

        Raises:
            ControlError: it exists with another count, or the broker refused.
        """
        try:
            await self.request(
                "PUT", admin_path("topic.partitions", topic=_full(topic)), partitions
            )
        except ControlError as exc:
            if "HTTP 409" not in str(exc):
                raise
            existing = await self.partitions(topic)
            if existing != partitions:
                raise ControlError(
                    f"{topic} exists with {existing} partitions, the scenario asks for {partitions}"
                ) from None
            return "exists"
        return "created"

    async def unload_topic(self, topic: str) -> str:
        count = await self.partitions(topic)
        names = [f"{normalize_topic(topic)}-partition-{i}" for i in range(count)] or [topic]
        for name in names:
            await self.request("PUT", admin_path("topic.unload", topic=_full(name)))
        return f"unloaded {len(names)} topic(s)"

    async def unload_namespace(self, namespace: str) -> str:
        await self.request("PUT", admin_path("namespace.unload", namespace=namespace))
        return "unloaded"

    async def unload_bundle(self, namespace: str, bundle: str, destination: str | None) -> str:
        params = {"destinationBroker": destination} if destination else {}
        where = admin_path("bundle.unload", namespace=namespace, bundle=bundle)
        await self.request("PUT", where, **params)
        return "unloaded"

    async def split_bundle(self, event: SplitBundle) -> str:
        params = {"unload": str(event.unload).lower(), "splitAlgorithmName": event.algorithm}
        where = admin_path("bundle.split", namespace=event.namespace, bundle=event.bundle)
        await self.request("PUT", where, event.boundaries, **params)
        return "split"

    async def set_dynamic_config(self, key: str, value: str) -> str:
        await self.request("POST", admin_path("brokers.dynamic_config", key=key, value=value))
        return f"{key}={value}"

    async def set_dispatch_rate(self, event: SetDispatchRate) -> str:
        body = {
            "dispatchThrottlingRateInMsg": event.msg_rate,
            "dispatchThrottlingRateInByte": event.byte_rate,
            "ratePeriodInSecond": event.period_s,
            "relativeToPublishRate": event.relative_to_publish_rate,
        }
        on_topic = not event.scope.startswith("namespace")
        target = _full(event.target) if on_topic else event.target
        try:
            where = dispatch_rate_path(event.scope, target, event.subscription)
        except ValueError as exc:
            raise ControlError(str(exc)) from None
        await self.request("POST", where, body)
        return f"{event.scope} dispatch rate {event.msg_rate} msg/{event.period_s}s"


def _full(topic: str) -> str:
    return normalize_topic(topic)


class ClusterControl:
    """Carries out events through whichever parts this cluster has."""

    def __init__(
        self,
        admin: AdminActions | None,
        processes: BrokerProcesses | None = None,
        stub: StubFaultControl | None = None,
    ) -> None:
        self.admin = admin
        self.processes = processes
        self.stub = stub

    def _need_admin(self) -> AdminActions:
        if self.admin is None:
            raise ControlError(
                f"this event needs the cluster's admin REST API: give its URL with "
                f"{ADMIN_URL_OPTION}"
            )
        return self.admin

    def _need_processes(self) -> BrokerProcesses:
        if self.processes is None:
            raise ControlError(
                "broker kill/restart needs a cluster loadgen started (cluster.start)"
            )
        return self.processes

    def _need_stub(self) -> StubFaultControl:
        if self.stub is None:
            raise ControlError('stub faults need cluster.start with storage = "stub"')
        return self.stub

    async def apply(self, event: Event) -> str:
        """Carry out `event`; what the cluster answered.

        Raises:
            ControlError: it could not be done.
        """
        match event:
            case UnloadTopic(topic=topic):
                return await self._need_admin().unload_topic(topic)
            case UnloadNamespace(namespace=namespace):
                return await self._need_admin().unload_namespace(namespace)
            case UnloadBundle(namespace=namespace, bundle=bundle, destination_broker=destination):
                return await self._need_admin().unload_bundle(namespace, bundle, destination)
            case SplitBundle():
                return await self._need_admin().split_bundle(event)
            case SetDispatchRate():
                return await self._need_admin().set_dispatch_rate(event)
            case SetDynamicConfig(key=key, value=value):
                return await self._need_admin().set_dynamic_config(key, value)
            case KillBroker(broker=broker, signal=signal_name):
                return await self._need_processes().kill(broker, signal_name)
            case RestartBroker(broker=broker):
                return await self._need_processes().restart(broker)
            case StubFaults(config=config):
                return await self._need_stub().configure(config)
            case StubFailNext(count=count, ops=ops):
                return await self._need_stub().fail_next(count, ops)
            case StubStall(seconds=seconds):
                return await self._need_stub().stall(float(seconds))
            case StubClear():
                return await self._need_stub().clear()
        raise ControlError(f"{type(event).__name__} is not a cluster action")
