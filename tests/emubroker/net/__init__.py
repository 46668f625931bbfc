"""Tests of emubroker.net."""

from __future__ import annotations
