"""emubroker: a Python emulator of an Apache Pulsar cluster for the official Pulsar clients."""

from __future__ import annotations
