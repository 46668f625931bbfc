"""Pulsar's extensible load manager (``ExtensibleLoadManagerImpl``, PIP-192).

``kind`` is its :class:`~emubroker.loadbalance.load_manager.LoadManager`; its data and
strategies are the shared ones (``model.extensible_data``, ``strategies.transfer_shedder``,
``strategies.extensible_placement``).
"""
