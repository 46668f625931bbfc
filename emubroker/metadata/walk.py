"""Reading a subtree of the metadata store: the one tree walk the services share.

Pulsar's resources are laid out as fixed-depth trees (:mod:`emubroker.metadata.paths`):
namespaces two levels below ``/admin/policies``, per-topic nodes four levels below their root.
:func:`walk` reads every node at one depth; :func:`walk_topics` names the per-topic ones.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import unquote

from emubroker.naming import InvalidNameError, TopicName

if TYPE_CHECKING:
    from emubroker.metadata.store import MetadataStore

__all__ = ["topic_of_path", "walk", "walk_topics"]

log = logging.getLogger(__name__)

TOPIC_DEPTH = 4
"""``<root>/<tenant>/<ns>/<domain>/<encoded local name>``."""


async def walk(store: MetadataStore, root: str, depth: int) -> list[tuple[list[str], bytes]]:
    """Every node exactly ``depth`` levels below ``root`` that exists, with its path parts.

    Args:
        store: The store to read.
        root: Where to start (need not exist: then nothing is found).
        depth: How many levels below ``root`` (1: its children).

    Returns:
        ``(parts, value)`` per node, ``parts`` the ``depth`` names below ``root`` as stored,
        in the store's child order.
    """
    found: list[tuple[list[str], bytes]] = []
    prefixes: list[list[str]] = [[]]
    for level in range(depth):
        deeper: list[list[str]] = []
        for parts in prefixes:
            base = "/".join([root, *parts])
            children = await store.children(base)
            if level < depth - 1:
                deeper.extend([*parts, child] for child in children)
                continue
            for child in children:
                node = await store.get(f"{base}/{child}")
                if node is not None:  # deleted between the listing and the read
                    found.append(([*parts, child], node.value))
        prefixes = deeper
    return found


def topic_of_path(root: str, path: str) -> TopicName | None:
    """The topic of a per-topic node's path below ``root``; None for any other path."""
    parts = path.removeprefix(root + "/").split("/")
    if not path.startswith(root + "/") or len(parts) != TOPIC_DEPTH:
        return None
    tenant, ns, domain, local = parts
    try:
        return TopicName.parse(f"{domain}://{tenant}/{ns}/{unquote(local)}")
    except InvalidNameError:
        return None


async def walk_topics(store: MetadataStore, root: str) -> list[tuple[TopicName, bytes]]:
    """Every per-topic node below ``root`` (``paths.topic_path`` shape), as topic names.

    A node whose path does not make a topic name is logged and skipped.
    """
    found: list[tuple[TopicName, bytes]] = []
    for parts, value in await walk(store, root, TOPIC_DEPTH):
        tenant, ns, domain, local = parts
        try:
            name = TopicName.parse(f"{domain}://{tenant}/{ns}/{unquote(local)}")
        except InvalidNameError:
            log.warning(
                "ignoring unparsable topic node %s/%s/%s/%s/%s", root, tenant, ns, domain, local
            )
            continue
        found.append((name, value))
    return found
