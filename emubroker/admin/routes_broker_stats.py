"""``/admin/v2/broker-stats``: this broker's load report (Pulsar's ``BrokerStatsBase``).

``GET /admin/v2/broker-stats/load-report`` answers what ``pulsar-admin broker-stats load-report``
prints: the modular load manager's ``generateLoadReport()``, i.e. this broker's
``LocalBrokerData`` brought up to date with its latest usage and bundle samples, in the JSON Pulsar
stores at ``/loadbalance/brokers/<broker>`` (``emubroker.loadbalance.model.codec``). Super-users
only, as in Pulsar.
"""

from __future__ import annotations

from aiohttp import web

from emubroker.admin.http import context
from emubroker.loadbalance.model.codec import encode

__all__ = ["add_routes"]


async def load_report(request: web.Request) -> web.Response:
    """``GET /admin/v2/broker-stats/load-report``."""
    report = context(request).load_reporter.load_report()
    return web.Response(body=encode(report), content_type="application/json")


def add_routes(app: web.Application) -> None:
    """Register the broker-stats routes."""
    app.router.add_get("/admin/v2/broker-stats/load-report", load_report)
