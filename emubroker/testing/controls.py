"""The controls a test drives a cluster with: URLs, ownership, unload, split, kill, throttling.

:class:`ClusterControls` (which ``cluster.PulsarCluster`` completes) wraps a backend
(``testing.inprocess`` or ``testing.processes``) that starts, stops and kills brokers;
everything else goes through the brokers' admin REST API, as ``pulsar-admin`` would, so both
kinds of cluster behave the same. Its methods are synchronous and may be called from any
thread; async tests use ``PulsarCluster.aio`` (``testing.aio``), whose coroutines run them in a
worker thread, so they do not mind which event loop awaits them.
Waits poll on the backend's clock and fail with :class:`ClusterTimeoutError` naming what they
waited for and what they last saw.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any, Final, Literal

from emubroker.adminclient import AdminClient, AdminError, dispatch_rate_path, path
from emubroker.naming import NamespaceName, TopicName
from emubroker.testing.errors import (
    ClusterAdminError,
    ClusterStoppedError,
    ClusterTimeoutError,
    UnknownBrokerError,
)
from emubroker.testing.storage import StorageFaults
from emubroker.testing.targets import Bundle, Namespace, Topic, parse_target, query
from protocol.clock import AnyioClock

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.testing.backend import BrokerHandle, ClusterBackend

__all__ = ["DEFAULT_TIMEOUT", "ClusterControls", "DispatchLevel"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a ``wait_*`` call waits by default."""
_POLL_INTERVAL: Final = 0.02

DispatchLevel = Literal["broker", "namespace", "topic", "subscription"]


class ClusterControls:
    """A running test cluster's synchronous controls (``cluster.PulsarCluster`` adds ``aio``).

    Attributes:
        mode: ``"thread"`` (brokers in a background thread) or ``"processes"``.
        storage: Fault injection on the cluster's bookie stub.
    """

    def __init__(self, backend: ClusterBackend, cluster_name: str) -> None:
        self._backend = backend
        self._cluster_name = cluster_name
        self._stopped = False
        self._clock = AnyioClock()
        self.mode = backend.mode
        self.storage = StorageFaults(backend.portal, backend.stub, self._check)

    # ---- what there is -----------------------------------------------------------------------

    @property
    def brokers(self) -> tuple[BrokerHandle, ...]:
        """Every broker, running or not, by index."""
        self._check()
        return tuple(self._backend.brokers())

    @property
    def running(self) -> tuple[BrokerHandle, ...]:
        """The brokers that serve now."""
        return tuple(b for b in self.brokers if self._backend.is_running(b.index))

    @property
    def service_url(self) -> str:
        """``pulsar://h:p1,h:p2,...``: every broker, as the Pulsar client accepts a list."""
        hosts = [b.service_url.removeprefix("pulsar://") for b in self.brokers]
        return "pulsar://" + ",".join(hosts)

    @property
    def admin_url(self) -> str:
        """The admin API of the first running broker (any broker answers for the cluster)."""
        return self._any_running().admin_url

    @property
    def leader(self) -> BrokerHandle:
        """The leader as a running broker reports it (see :meth:`wait_for_leader`).

        Raises:
            ClusterAdminError: No leader is known right now.
        """
        answer = self.admin("GET", path("brokers.leader"))
        return self.broker(answer["brokerId"])

    def broker(self, ref: BrokerHandle | int | str) -> BrokerHandle:
        """The broker ``ref`` names (a handle, an index, an id or a URL).

        Raises:
            UnknownBrokerError: No broker of this cluster has that name.
        """
        brokers = self.brokers
        if isinstance(ref, int) and not isinstance(ref, bool):
            if 0 <= ref < len(brokers):
                return brokers[ref]
        elif isinstance(ref, str):
            address = ref.split("://", 1)[-1].rstrip("/")
            for b in brokers:
                urls = (b.service_url, b.admin_url)
                if address == b.id or address in (u.split("://", 1)[1] for u in urls):
                    return b
        elif ref in brokers:
            return ref
        known = ", ".join(f"{b.index} ({b.id})" for b in brokers)
        raise UnknownBrokerError(f"no broker {ref!r} in this cluster; its brokers are {known}")

    def owner_of(self, topic: str) -> BrokerHandle | None:
        """The broker that owns ``topic``'s bundle now, or ``None`` (a lookup would place it)."""
        return self._owner_of_bundle(self.bundle_of(topic))

    def bundle_of(self, topic: str) -> Bundle:
        """The bundle ``topic`` hashes into (``GET /lookup/v2/topic/.../bundle``)."""
        target = parse_target(topic)
        if not isinstance(target, Topic):
            raise ValueError(f"{topic!r} is not a topic name")
        bundle_range = self.admin(
            "GET", path("topic.bundle", topic=str(TopicName.parse(target.name)))
        )
        return Bundle(str(TopicName.parse(target.name).namespace), str(bundle_range).strip())

    def bundles(self, namespace: str) -> list[Bundle]:
        """The namespace's bundles, lowest range first (``GET .../bundles``)."""
        answer = self.admin(
            "GET", path("namespace.bundles", namespace=str(NamespaceName.parse(namespace)))
        )
        bounds = answer["boundaries"]
        return [Bundle(namespace, f"{lo}_{hi}") for lo, hi in itertools.pairwise(bounds)]

    # ---- moving bundles ----------------------------------------------------------------------

    def unload(self, target: str | Bundle, *, to: BrokerHandle | int | str | None = None) -> None:
        """Unload a topic, a bundle or a namespace (``pulsar-admin ... unload``).

        A topic alone is closed and its clients reconnect to the same owner (Pulsar's topic
        unload). With ``to``, what moves is the bundle (or every owned bundle of the namespace)
        and the leader places it on ``to`` (Pulsar's ``destinationBroker``).
        """
        parsed = target if isinstance(target, Bundle) else parse_target(target)
        destination = None if to is None else self.broker(to).id
        match parsed:
            case Topic() if destination is None:
                self.admin("PUT", path("topic.unload", topic=str(TopicName.parse(parsed.name))))
            case Topic():
                self.unload(self.bundle_of(parsed.name), to=destination)
            case Namespace() if destination is None:
                self.admin("PUT", path("namespace.unload", namespace=parsed.name))
            case Namespace():
                for bundle in self.bundles(parsed.name):
                    if self._owner_of_bundle(bundle) is not None:
                        self.unload(bundle, to=destination)
            case Bundle():
                unload = path("bundle.unload", namespace=parsed.namespace, bundle=parsed.range)
                self.admin("PUT", unload + query(destinationBroker=destination))

    def split(
        self,
        bundle: str | Bundle,
        *,
        algorithm: str | None = None,
        boundaries: list[int] | None = None,
        unload: bool = False,
    ) -> None:
        """Split a bundle (``pulsar-admin namespaces split-bundle``).

        Args:
            bundle: ``tenant/namespace/0x..._0x...`` (or a :class:`Bundle`).
            algorithm: ``range_equally_divide``, ``topic_count_equally_divide``,
                ``specified_positions_divide``, ``flow_or_qps_equally_divide``; the broker's
                ``defaultNamespaceBundleSplitAlgorithm`` when ``None``.
            boundaries: The hash positions for ``specified_positions_divide``.
            unload: Unload the new bundles after the split.
        """
        parsed = bundle if isinstance(bundle, Bundle) else parse_target(bundle)
        if not isinstance(parsed, Bundle):
            raise ValueError(f"{bundle!r} is not a bundle (tenant/namespace/0x..._0x...)")
        params = query(unload=str(unload).lower(), splitAlgorithmName=algorithm)
        split = path("bundle.split", namespace=parsed.namespace, bundle=parsed.range)
        self.admin("PUT", split + params, boundaries)

    # ---- brokers come and go -----------------------------------------------------------------

    def kill(self, broker: BrokerHandle | int | str) -> None:
        """End a broker as a crash does; returns once it is gone.

        No hand-over: its metadata session ends (its locks and bundles are free at once; with
        ``mode="processes"`` it is SIGKILL and the session expires) and its connections drop.
        """
        self._backend.kill(self._running_broker(broker, "kill").index)

    def stop(self, broker: BrokerHandle | int | str) -> None:
        """Stop a broker gracefully: it hands its bundles over first (SIGTERM)."""
        self._backend.stop(self._running_broker(broker, "stop").index)

    def restart(self, broker: BrokerHandle | int | str) -> None:
        """Start a broker again on its ports (stopping it first if it runs)."""
        handle = self.broker(broker)
        if self._backend.is_running(handle.index):
            self._backend.stop(handle.index)
        self._backend.start(handle.index)

    # ---- policies and configuration ----------------------------------------------------------

    def set_dispatch_rate(
        self,
        level: DispatchLevel,
        target: str | None = None,
        *,
        messages: int = -1,
        bytes_per_period: int = -1,
        period: int = 1,
        subscription: str | None = None,
        relative_to_publish_rate: bool = False,
    ) -> None:
        """Limit dispatch at one of Pulsar's levels (``-1``: no limit on that unit).

        ``broker``: the broker-wide limit of every broker (``dispatchThrottlingRateInMsg`` and
        ``...InByte``, dynamic configuration, per second). ``namespace``: each topic of the
        namespace ``target``. ``topic``: the topic ``target``. ``subscription``: each
        subscription of the namespace or topic ``target``, or only ``subscription`` of topic
        ``target`` (PIP-152).
        """
        if level == "broker":
            self.set_config("dispatchThrottlingRateInMsg", max(messages, 0))
            self.set_config("dispatchThrottlingRateInByte", max(bytes_per_period, 0))
            return
        if target is None:
            raise ValueError(f"a {level}-level dispatch rate needs the namespace or topic")
        rate = {
            "dispatchThrottlingRateInMsg": messages,
            "dispatchThrottlingRateInByte": bytes_per_period,
            "relativeToPublishRate": relative_to_publish_rate,
            "ratePeriodInSecond": period,
        }
        self.admin("POST", _dispatch_rate_path(level, parse_target(target), subscription), rate)

    def set_config(self, key: str, value: object) -> None:
        """Set a dynamic configuration key on every broker (``brokers update-dynamic-config``)."""
        text = str(value).lower() if isinstance(value, bool) else str(value)
        self.admin("POST", path("brokers.dynamic_config", key=key, value=text))

    def admin(
        self, method: str, path: str, body: Any = None, *, at: BrokerHandle | None = None
    ) -> Any:
        """One admin REST call (redirects followed); returns the decoded answer.

        Raises:
            ClusterAdminError: The broker answered an error (quoted with the call).
        """
        broker = at if at is not None else self._any_running()
        try:
            return AdminClient(broker.admin_url).call(method, path, body)
        except AdminError as exc:
            raise ClusterAdminError(f"{method} {path} at broker {broker.id}: {exc}") from None

    # ---- waiting -----------------------------------------------------------------------------

    def wait_until_owned(
        self,
        topic: str,
        *,
        by: BrokerHandle | int | str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> BrokerHandle:
        """Wait until a running broker (``by``, if given) owns ``topic``'s bundle; returns it."""
        wanted = None if by is None else self.broker(by)
        seen: list[BrokerHandle | None] = []

        def owned() -> BrokerHandle | None:
            owner = self.owner_of(topic)
            seen.append(owner)
            return owner if owner is not None and wanted in (None, owner) else None

        who = "a running broker" if wanted is None else f"broker {wanted.index} ({wanted.id})"
        return self._wait(
            owned,
            timeout,
            lambda: (
                f"{topic} was not owned by {who} within {timeout:g} s; "
                f"last owner seen: {_describe(seen[-1] if seen else None)}"
            ),
        )

    def wait_for_leader(self, *, timeout: float = DEFAULT_TIMEOUT) -> BrokerHandle:
        """Wait until every running broker reports the same running leader; returns it."""
        seen: dict[str, str] = {}

        def agreed() -> BrokerHandle | None:
            seen.clear()
            for b in self.running:
                try:
                    seen[b.id] = self.admin("GET", path("brokers.leader"), at=b)["brokerId"]
                except ClusterAdminError as exc:
                    seen[b.id] = str(exc).rsplit(": ", 1)[-1]
            ids = set(seen.values())
            running = {b.id for b in self.running}
            return self.broker(ids.pop()) if len(ids) == 1 and ids <= running else None

        return self._wait(
            agreed,
            timeout,
            lambda: (
                f"the running brokers did not agree on a running leader within {timeout:g} s;"
                f" each reported: {json.dumps(seen)}"
            ),
        )

    # ---- lifetime ----------------------------------------------------------------------------

    def mark_stopped(self) -> None:
        """Called by whoever stopped the cluster: every later use raises ClusterStoppedError."""
        self._stopped = True

    # ---- helpers -----------------------------------------------------------------------------

    def _check(self) -> None:
        if self._stopped:
            raise ClusterStoppedError(
                "this pulsar_cluster has stopped (its fixture or context manager ended); "
                "a handle cannot outlive the scope it was made in"
            )

    def _any_running(self) -> BrokerHandle:
        for b in self.running:
            return b
        raise UnknownBrokerError("no broker of this cluster is running (restart one first)")

    def _running_broker(self, ref: BrokerHandle | int | str, action: str) -> BrokerHandle:
        handle = self.broker(ref)
        if not self._backend.is_running(handle.index):
            raise UnknownBrokerError(
                f"cannot {action} broker {handle.index} ({handle.id}): it is not running"
            )
        return handle

    def _owner_of_bundle(self, bundle: Bundle) -> BrokerHandle | None:
        for b in self.running:
            owned = path("brokers.owned_namespaces", cluster=self._cluster_name, broker=b.id)
            if str(bundle) in self.admin("GET", owned, at=b):
                return b
        return None

    def _wait(
        self,
        probe: Callable[[], BrokerHandle | None],
        timeout: float,
        explain: Callable[[], str],
    ) -> BrokerHandle:
        self._check()
        portal = self._backend.portal
        deadline = portal.call(self._clock.now) + timeout
        while True:
            self._check()
            found = probe()
            if found is not None:
                return found
            if portal.call(self._clock.now) >= deadline:
                raise ClusterTimeoutError(explain())
            portal.call(self._clock.sleep, _POLL_INTERVAL)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"{len(self._backend.brokers())} brokers"
        return f"<{type(self).__name__} {self.mode} {state}>"


def _dispatch_rate_path(
    level: DispatchLevel, target: Topic | Namespace | Bundle, subscription: str | None
) -> str:
    match level, target:
        case "namespace", Namespace():
            return dispatch_rate_path("namespace", target.name)
        case "topic", Topic():
            return dispatch_rate_path("topic", target.name)
        case "subscription", Namespace() if subscription is None:
            return dispatch_rate_path("namespace_subscription", target.name)
        case "subscription", Topic() if subscription is None:
            return dispatch_rate_path("topic_subscription", target.name)
        case "subscription", Topic() if subscription is not None:
            return dispatch_rate_path("subscription", target.name, subscription)
    raise ValueError(
        f"no {level}-level dispatch rate for {target}"
        + (" (a single subscription's rate is set on a topic)" if subscription else "")
    )


def _describe(broker: BrokerHandle | None) -> str:
    return "none" if broker is None else f"broker {broker.index} ({broker.id})"
