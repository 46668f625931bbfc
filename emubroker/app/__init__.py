"""The composition root: builds the broker's services, wires them and serves them.

One job a module, importing down this list only (import-linter checks it):

- ``wiring``: ``open_broker`` builds every service, wires their callbacks and opens them in one
  task group; ``serve_broker`` is its ``serve_*`` form (STYLE.md §1.15) used by the CLI;
- ``listeners``: the ports, bound before the services start and served once they run;
- ``admin_context``: what the admin REST API serves, from the broker's services;
- ``backends``: where metadata and entries live (``open_storage``: memory, a stub in this
  process, an external stub or etcd);
- ``broker``: the running ``Broker`` ``open_broker`` yields;
- ``bootstrap``: the cluster, tenants and namespaces a new cluster starts with.

The names below are the package's API: callers import them from ``emubroker.app``.
"""

from __future__ import annotations

from emubroker.app.backends import open_storage
from emubroker.app.bootstrap import DEFAULT_NAMESPACES, DEFAULT_TENANTS, bootstrap_metadata
from emubroker.app.broker import Broker, broker_id_of
from emubroker.app.wiring import open_broker, serve_broker, topic_settings
from emubroker.namespace_registry import NamespaceRegistry

__all__ = [
    "DEFAULT_NAMESPACES",
    "DEFAULT_TENANTS",
    "Broker",
    "NamespaceRegistry",
    "bootstrap_metadata",
    "broker_id_of",
    "open_broker",
    "open_storage",
    "serve_broker",
    "topic_settings",
]
