"""Bundle ownership and lookup: who owns a bundle and how a lookup finds or places it.

``table`` maps bundles to owners over the metadata store; ``lookup`` answers a lookup;
``assignment`` places an unowned bundle; ``broker_registry`` reads the registered brokers;
``placement_policies`` caches the placement policies; ``unloading`` and ``bundle_split`` are
the owner's side of an unload and a split.
"""
