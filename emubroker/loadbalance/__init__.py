"""Load balancing: Pulsar's load data model, placement, shedding and bundle splitting.

The pure part (docs/load-balancing.md): the data model (``data``, ``extensible_data``,
``usage``, JSON in ``codec``), the strategies (``shedding``, ``avg_shedder``,
``transfer_shedder``, ``placement``, ``extensible_placement``), the placement pipeline
(``selection``, ``filters``, ``isolation``), splitting (``split``) and the leader's decisions
(``modular``). ``ownership`` maps bundles to their owning broker over the metadata store;
``reporter`` keeps a broker's registration and load report current (with ``usage_sources``,
``psutil_source``, ``bundle_sampler``) and ``broker_registry`` reads the registered brokers.

The package imports none of its modules: a broker imports the data model and its runtime
wiring when it starts, and a strategy module when the leader first runs it (docs/performance.md).
"""
