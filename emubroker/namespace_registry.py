"""Which namespaces exist, with their policies: the broker's synchronous view of the store.

The topic service asks on every topic creation and the handlers on every lookup, so the answer
must not need a metadata round trip. :class:`NamespaceRegistry` keeps a copy of every
``/admin/policies/<tenant>/<namespace>`` node (Pulsar's ``Policies`` JSON, see
:mod:`emubroker.policies`) current through a metadata watch, whichever broker wrote the change,
and reports each change to an optional callback (the composition root hands bundle boundaries to
the ownership table that way).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.metadata import NotificationKind, WatchOverflowError
from emubroker.metadata.paths import POLICIES_ROOT, namespace_path
from emubroker.metadata.walk import walk
from emubroker.naming import InvalidNameError, NamespaceName
from emubroker.policies import Policies, decode_policies

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskStatus

    from emubroker.metadata import MetadataStore

__all__ = ["NamespaceRegistry"]

log = logging.getLogger(__name__)


class NamespaceRegistry:
    """Which namespaces exist, with their policies: a synchronous view of the metadata store.

    The topic service asks on every topic creation and the handlers on lookups, so answers must
    not need a store round trip; :meth:`watch` keeps the view current as namespaces are created,
    changed and deleted.

    Args:
        on_change: Called with a namespace and its new policies (None: deleted) whenever the
            view changes, e.g. to hand bundle boundaries to the ownership table.
    """

    def __init__(
        self, on_change: Callable[[NamespaceName, Policies | None], None] | None = None
    ) -> None:
        self._policies: dict[NamespaceName, Policies] = {}
        self._on_change = on_change

    def exists(self, namespace: NamespaceName) -> bool:
        """Whether the namespace exists (V1 names with a cluster never do)."""
        return namespace in self._policies

    def __call__(self, namespace: NamespaceName) -> bool:
        return namespace in self._policies

    def namespaces(self) -> list[NamespaceName]:
        """Every known namespace, sorted."""
        return sorted(self._policies, key=str)

    def policies(self, namespace: NamespaceName) -> Policies | None:
        """A namespace's policies as last seen, or None if it does not exist."""
        return self._policies.get(namespace)

    def apply(self, namespace: NamespaceName, policies: Policies | None) -> None:
        """Record a change the caller just wrote (None: deleted), before the watch reports it.

        The admin API calls this after its own writes so that a client acting right after a
        ``204`` sees the change; the watch later applies the same value again, harmlessly.
        """
        if policies is None:
            if self._policies.pop(namespace, None) is None:
                return
        else:
            self._policies[namespace] = policies
        if self._on_change is not None:
            self._on_change(namespace, policies)

    async def load(self, store: MetadataStore) -> None:
        """Read every namespace from the store (replacing the current view)."""
        found: dict[NamespaceName, Policies] = {}
        for (tenant, local), raw in await walk(store, POLICIES_ROOT, 2):
            namespace = _namespace(tenant, local)
            if namespace is not None:
                found[namespace] = _decode_or_default(namespace, raw)
        gone = set(self._policies) - set(found)
        self._policies = found
        if self._on_change is not None:
            for namespace in gone:
                self._on_change(namespace, None)
            for namespace, policies in found.items():
                self._on_change(namespace, policies)

    async def read(self, store: MetadataStore, namespace: NamespaceName) -> bool:
        """Whether ``namespace`` exists, asking the store when this view has not seen it.

        The watch learns of a namespace created through another broker a moment later; a client
        that creates one there and at once looks a topic up here must not be told it does not
        exist (Pulsar's policies cache reads the store on a miss). A namespace found is kept.

        Raises:
            MetadataStoreError: The store failed.
        """
        if self.exists(namespace):
            return True
        node = await store.get(namespace_path(namespace))
        if node is None:
            return False
        self.apply(namespace, _decode_or_default(namespace, node.value))
        return True

    async def watch(
        self, store: MetadataStore, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Follow namespace creations, changes and deletions until cancelled."""
        while True:
            async with store.watch(POLICIES_ROOT) as notifications:
                await self.load(store)  # after subscribing: no change can fall in between
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                try:
                    async for note in notifications:
                        await self._apply(store, note.path, note.kind)
                except WatchOverflowError:
                    log.warning("namespace watch overflowed; re-reading")
                    continue
            return  # the store was closed

    async def _apply(self, store: MetadataStore, path: str, kind: NotificationKind) -> None:
        parts = path[len(POLICIES_ROOT) + 1 :].split("/")
        if len(parts) != 2:
            return  # a tenant node or something deeper
        namespace = _namespace(parts[0], parts[1])
        if namespace is None:
            return
        # Read the node rather than trust the kind: a later write may already have replaced it.
        node = None if kind is NotificationKind.DELETED else await store.get(path)
        self.apply(namespace, None if node is None else _decode_or_default(namespace, node.value))


def _namespace(tenant: str, local: str) -> NamespaceName | None:
    try:
        return NamespaceName(tenant, local)
    except InvalidNameError:
        return None


def _decode_or_default(namespace: NamespaceName, raw: bytes) -> Policies:
    try:
        return decode_policies(raw)
    except msgspec.DecodeError as exc:
        # Written by something else than the admin API; the namespace still exists.
        log.warning("unreadable policies of namespace %s (%s); using defaults", namespace, exc)
        return Policies()
