"""The load manager ``loadManagerClassName`` names: the one place the class name is read.

Pulsar creates its load manager by reflection from the class name; here each supported name
maps to its :class:`~emubroker.loadbalance.load_manager.LoadManager` (the configuration
accepts only these names, ``emubroker.config.loadbalancer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER, MODULAR_LOAD_MANAGER
from emubroker.loadbalance.extensible.kind import ExtensibleKind
from emubroker.loadbalance.modular.kind import ModularKind

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.load_manager import LoadManager

__all__ = ["LOAD_MANAGERS", "load_manager"]

LOAD_MANAGERS: Final[dict[str, LoadManager]] = {
    MODULAR_LOAD_MANAGER: ModularKind(),
    EXTENSIBLE_LOAD_MANAGER: ExtensibleKind(),
}


def load_manager(conf: BrokerConfig) -> LoadManager:
    """The load manager ``conf.loadManagerClassName`` names (a validated configuration's)."""
    return LOAD_MANAGERS[conf.loadManagerClassName]
