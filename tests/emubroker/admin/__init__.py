"""Tests of emubroker.admin."""

from __future__ import annotations
