"""Tests for the ``storage_stub`` package."""

from __future__ import annotations
