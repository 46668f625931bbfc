"""The strategies, pure objects over the data model: shedding, placement, filters, splitting.

``factory`` builds them from the registry (``emubroker.config.strategies``: each strategy's
Pulsar class name, class, keys and start-up checks); ``shedding``, ``avg_shedder`` and
``transfer_shedder`` shed; ``placement``, ``extensible_placement``, ``selection``, ``filters``
and ``isolation`` place; ``split`` chooses bundles to split and where. This package imports
none of its modules.
"""
