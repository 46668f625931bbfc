"""Pulsar's modular load manager (``ModularLoadManagerImpl``, the default).

``kind`` is its :class:`~emubroker.loadbalance.load_manager.LoadManager`; its decisions are
``strategies.modular_manager`` (``ModularLoadManager``, pure).
"""
