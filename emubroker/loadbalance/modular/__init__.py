"""Pulsar's modular load manager (``ModularLoadManagerImpl``, the default).

``manager`` is its leader's decisions without I/O (``ModularLoadManager``); ``kind`` is the
:class:`~emubroker.loadbalance.load_manager.LoadManager` the leader and placement use.
"""
