"""The HTTP admin API (Pulsar's REST v2 paths) and ``/metrics``."""

from __future__ import annotations

from emubroker.admin.app import build_admin_app, serve_admin
from emubroker.admin.metrics import CONTENT_TYPE, MetricsCollector, render_metrics

__all__ = ["CONTENT_TYPE", "MetricsCollector", "build_admin_app", "render_metrics", "serve_admin"]
