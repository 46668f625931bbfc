"""The bookie stub: ledger storage (and later the metadata service) for emubroker brokers."""

from __future__ import annotations
