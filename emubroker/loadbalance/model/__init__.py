"""The load data model: Pulsar's load classes, the usage arithmetic, their JSON and Java orders.

Pure (no I/O, no clock): ``data`` (the modular manager's ``LoadData``, ``LocalBrokerData``,
``BundleData``...), ``extensible_data`` (``BrokerLoadData``, top bundles, unload decisions),
``usage`` (``ResourceUsage`` and the weighted maxima), ``bundle_stats``, ``codec`` (Jackson's
JSON) and ``javaorder`` (Java's iteration orders where they decide a result).
"""
