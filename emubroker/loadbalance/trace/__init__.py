"""The load-balancer trace (docs/load-balancer-trace.md).

Its rows (``records``), its Parquet file (``sink``) and the recent rows kept for the dashboard
(``ring``).
"""
