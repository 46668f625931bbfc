"""Delivery traces: the versioned record schema and the buffered Parquet writer."""

from __future__ import annotations
