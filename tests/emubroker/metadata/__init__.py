"""Tests for ``emubroker.metadata``."""

from __future__ import annotations
