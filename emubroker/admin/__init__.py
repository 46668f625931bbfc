"""The HTTP admin API (Pulsar's REST v2 paths) and ``/metrics``."""

from __future__ import annotations

from emubroker.admin.app import build_admin_app, serve_admin
from emubroker.admin.context import CONTEXT, AdminContext
from emubroker.admin.errors import RestError
from emubroker.admin.metrics import CONTENT_TYPE, MetricsCollector, RateTracker, render_metrics
from emubroker.admin.topic_stats import TopicStatsView

__all__ = [
    "CONTENT_TYPE",
    "CONTEXT",
    "AdminContext",
    "MetricsCollector",
    "RateTracker",
    "RestError",
    "TopicStatsView",
    "build_admin_app",
    "render_metrics",
    "serve_admin",
]
