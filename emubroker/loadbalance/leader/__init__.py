"""The leader's runtime: election, its tasks, the aggregated load data, shedding and splitting.

``election`` elects the leader; ``tasks`` runs its periodic tasks while it leads;
``aggregation`` keeps the load data from the reports (read by ``broker_registry``);
``shedding_runtime`` and ``split_runtime`` carry the decisions out, through the bundles' owners
(``ownership.owner_calls``).
"""
