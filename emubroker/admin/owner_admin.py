"""The leader's admin calls to a bundle's owner over its REST API (``leader.owner_calls``).

Pulsar's leader reaches the owner through its ``PulsarAdmin`` client, authenticated with
``brokerClientAuthenticationPlugin`` and ``brokerClientAuthenticationParameters``. Here the
calls go straight to the owner's web service (its ``http://`` address from the ownership node,
``https://`` when that is all it has) with ``authoritative=true``, as the leader's own endpoint
would send them on:

- ``PUT /admin/v2/namespaces/{tenant}/{namespace}/{range}/unload``;
- ``PUT /admin/v2/namespaces/{tenant}/{namespace}/{range}/split?unload=...`` (no algorithm: the
  owner's ``defaultNamespaceBundleSplitAlgorithm``, as Pulsar passes ``null``).

Any answer but 2xx, and any connection failure, raises ``OwnerCallError`` with the status and
the body; the overall time limit is the caller's (on the injected clock).

A bundle *transferred* to a destination (``ownership.unloading`` rule 5) is taken there by
:func:`http_take_over`: the destination's lookup of one of the bundle's topics with
``authoritative=true`` (``GET /lookup/v2/topic/...``, at the web address of its load report),
which makes a broker the owner of an unowned bundle, as it does when the leader redirects a
lookup there; its ``LookupData`` (``brokerUrl``, ``brokerUrlTls``) is where the clients go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp

from emubroker.adminclient import AdminHttpError, AdminUnreachableError, AsyncAdminClient, path
from emubroker.auth.broker_client import authorization_header, plugin_kind
from emubroker.loadbalance.ownership.bundle_split import stored_children
from emubroker.loadbalance.ownership.owner_calls import OwnerCallError, OwnerCalls
from emubroker.loadbalance.runtime.broker_registry import read_report
from emubroker.naming import AssignedBroker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.ownership.bundle_split import BundleSplitter
    from emubroker.loadbalance.ownership.owner_calls import OwnerAdmin
    from emubroker.loadbalance.ownership.records import BrokerInfo
    from emubroker.loadbalance.ownership.table import OwnershipTable
    from emubroker.loadbalance.ownership.unloading import BundleUnloader
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceBundle, TopicName
    from protocol.clock import Clock

__all__ = [
    "CONNECT_TIMEOUT",
    "HttpOwnerAdmin",
    "broker_client_headers",
    "build_owner_calls",
    "http_take_over",
]

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection to the owner (a dead owner fails here)."""


class HttpOwnerAdmin:
    """:class:`~emubroker.loadbalance.ownership.owner_calls.OwnerAdmin` over HTTP.

    Args:
        config: The live configuration (the broker client's credentials).
    """

    def __init__(self, config: Callable[[], BrokerConfig]) -> None:
        self._config = config

    async def unload(
        self, owner: BrokerInfo, bundle: NamespaceBundle, *, reason: str, destination: str
    ) -> None:
        query = {"authoritative": "true", "emubrokerUnloadReason": reason}
        if destination:
            query["destinationBroker"] = destination
        await self._put(owner, bundle, "unload", query)

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        query = {"unload": str(unload).lower(), "authoritative": "true"}
        await self._put(owner, bundle, "split", query)

    def _headers(self) -> dict[str, str]:
        return broker_client_headers(self._config())

    async def _put(
        self, owner: BrokerInfo, bundle: NamespaceBundle, action: str, query: dict[str, str]
    ) -> None:
        base = owner.http_url or owner.http_url_tls
        if not base:
            raise OwnerCallError(f"the owner of {bundle} has no web service address")
        where = path(
            f"bundle.{action}", namespace=str(bundle.namespace), bundle=str(bundle.bundle_range)
        )
        client = AsyncAdminClient(
            base,
            timeout=aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT),
            headers=self._headers(),
            follow_redirects=False,
        )
        url = client.base_url + where
        try:
            await client.request("PUT", where, params=query)
        except AdminHttpError as exc:
            raise OwnerCallError(f"{url} answered {exc.status}: {exc.body[:500]}") from None
        except AdminUnreachableError as exc:
            raise OwnerCallError(f"{url}: {exc.__cause__ or exc}") from exc


def http_take_over(
    store: MetadataStore, config: Callable[[], BrokerConfig]
) -> Callable[[str, TopicName], Awaitable[AssignedBroker]]:
    """``ownership.unloading.TakeOver`` over the destination's HTTP lookup (module docstring)."""

    async def take_over(broker_id: str, topic: TopicName) -> AssignedBroker:
        report = await read_report(store, broker_id)
        base = None if report is None else (report.web_service_url or report.web_service_url_tls)
        if not base:
            raise OwnerCallError(f"broker {broker_id} has no web service address")
        client = AsyncAdminClient(
            base,
            timeout=aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT),
            headers=broker_client_headers(config()),
            follow_redirects=False,
        )
        where = path("topic.lookup", topic=str(topic))
        try:
            found = await client.request("GET", where, params={"authoritative": "true"})
        except AdminHttpError as exc:
            raise OwnerCallError(
                f"lookup at {base} answered {exc.status}: {exc.body[:500]}"
            ) from None
        except AdminUnreachableError as exc:
            raise OwnerCallError(f"lookup at {base}: {exc.__cause__ or exc}") from exc
        if not isinstance(found, dict) or not found.get("brokerUrl"):
            raise OwnerCallError(f"lookup at {base} answered no brokerUrl: {found!r}")
        return AssignedBroker(str(found["brokerUrl"]), str(found.get("brokerUrlTls") or ""))

    return take_over


def broker_client_headers(conf: BrokerConfig) -> dict[str, str]:
    """The ``Authorization`` of this broker's own admin client (``brokerClientAuthentication*``)."""
    header = authorization_header(
        plugin_kind(conf.brokerClientAuthenticationPlugin),
        conf.brokerClientAuthenticationParameters,
    )
    return {} if header is None else {"Authorization": header}


def build_owner_calls(
    ownership: OwnershipTable,
    clock: Clock,
    *,
    store: MetadataStore,
    config: Callable[[], BrokerConfig],
    unloader: BundleUnloader,
    splitter: Callable[[], BundleSplitter | None],
    set_affinity: Callable[[str, str], None],
    remote: OwnerAdmin | None = None,
) -> OwnerCalls:
    """The leader's unloads and splits at the bundles' owners (``HttpOwnerAdmin`` by default).

    ``splitter`` gives this broker's splitter when the leader itself owns the bundle;
    ``set_affinity`` is the leader's placement affinity (``BrokerSelector.set_affinity``).
    """

    async def split_here(bundle: NamespaceBundle, unload: bool) -> Sequence[NamespaceBundle]:
        found = splitter()
        if found is None:
            raise OwnerCallError("this broker cannot split bundles")
        algorithm = config().defaultNamespaceBundleSplitAlgorithm
        return await found.split(bundle, algorithm, unload=unload)

    return OwnerCalls(
        ownership,
        clock,
        remote=remote if remote is not None else HttpOwnerAdmin(config),
        unload_local=lambda bundle, reason, destination: unloader.unload(
            bundle, reason=reason, destination=destination
        ),
        split_local=split_here,
        set_affinity=set_affinity,
        children_of=lambda bundle: stored_children(store, bundle),
    )
