"""Tests for the ``emubroker`` package."""

from __future__ import annotations
