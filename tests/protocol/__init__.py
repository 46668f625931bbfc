"""Tests for the ``protocol`` package."""

from __future__ import annotations
