"""Pulsar wire formats: sans-IO codec, framing, errors and clock, plus a thin anyio client."""

from __future__ import annotations
