"""Shared test helpers: in-memory streams, builders, hypothesis strategies."""

from __future__ import annotations
