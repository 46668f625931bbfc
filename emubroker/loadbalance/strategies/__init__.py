"""The strategies, pure objects over the data model: shedding, placement, filters, splitting.

``registry`` names every strategy (Pulsar's class name, class, keys, start-up checks) and
``factory`` builds them; ``shedding``, ``avg_shedder`` and ``transfer_shedder`` shed;
``placement``, ``extensible_placement``, ``selection``, ``filters`` and ``isolation`` place;
``split`` chooses bundles to split and where. This package imports none of its modules (the
configuration reads ``registry`` alone).
"""
