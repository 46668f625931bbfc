"""One typed client of the admin REST API, for everything of ours that calls it.

A leaf: it imports nothing of ours, so the CLI, the test handle, loadgen's cluster control
and the leader's calls to bundle owners all use it (pyproject's import contracts). The paths
are in one table (``paths.ROUTES``, with the dispatch-rate scopes' routes); ``sync`` has the
urllib client (short synchronous processes), ``aio`` the aiohttp one.
"""

from __future__ import annotations

from emubroker.adminclient.aio import AsyncAdminClient
from emubroker.adminclient.errors import AdminError, AdminHttpError, AdminUnreachableError
from emubroker.adminclient.paths import dispatch_rate_path, path
from emubroker.adminclient.sync import AdminClient

__all__ = [
    "AdminClient",
    "AdminError",
    "AdminHttpError",
    "AdminUnreachableError",
    "AsyncAdminClient",
    "dispatch_rate_path",
    "path",
]
