"""Tests of emubroker.loadbalance."""

from __future__ import annotations
