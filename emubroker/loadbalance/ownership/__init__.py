"""Bundle ownership and lookup: who owns a bundle and how a lookup finds or places it.

``table`` maps bundles to owners over the metadata store (its records, ``BrokerInfo`` and the
lock node's JSON, in ``records``); ``lookup`` answers a lookup;
``assignment`` places an unowned bundle; ``placement_policies`` caches the placement policies;
``unloading`` and ``bundle_split`` are the owner's side of an unload and a split, and
``owner_calls`` the leader's calls that ask an owner for them.
"""
