"""Load balancing: bundle ownership today; load reports, placement and shedding later."""

from __future__ import annotations

from emubroker.loadbalance.ownership import (
    BrokerInfo,
    NamespaceEphemeralData,
    OwnershipTable,
    ownership_path,
)

__all__ = ["BrokerInfo", "NamespaceEphemeralData", "OwnershipTable", "ownership_path"]
