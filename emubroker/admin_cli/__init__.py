"""``emubroker admin ...``: a command line shaped like ``pulsar-admin`` over the admin REST API.

Resources and commands follow ``pulsar-admin`` (``clusters``, ``tenants``, ``namespaces``,
``topics``, ``brokers``, ``broker-stats``) with its flag names (``-p`` partitions, ``-s``
subscription, ``-m`` message id, ``-f`` force ...). Topic arguments take complete or short
names (``my-topic``, ``tenant/ns/my-topic``, ``non-persistent://tenant/ns/my-topic``). JSON
answers are printed pretty; successful writes print nothing. A failed call prints
``error: <status> <phrase>: <reason>`` to stderr and exits 1; usage errors exit 2.

Modules: ``main`` (the parser and the run), ``namespaces`` (clusters, tenants, namespaces),
``topics``, ``bundles``, ``placement``, ``security`` (credentials, permissions, tokens) and
``args`` (names to paths, durations). It calls the admin API through ``emubroker.adminclient``'s
synchronous client (``urllib``): the CLI is a short synchronous process, so an event loop would
add nothing.
"""

from __future__ import annotations

from emubroker.admin_cli.args import namespace_admin_path, topic_admin_path
from emubroker.admin_cli.main import DEFAULT_ADMIN_URL, add_parser, main, run
from emubroker.adminclient import AdminClient, AdminError

__all__ = [
    "DEFAULT_ADMIN_URL",
    "AdminClient",
    "AdminError",
    "add_parser",
    "main",
    "namespace_admin_path",
    "run",
    "topic_admin_path",
]
