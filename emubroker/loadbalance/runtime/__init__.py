"""The leader's runtime that both load managers build on.

``aggregation`` keeps the leader's load data from the reports (read by ``broker_registry``);
``shedding_runtime`` and ``split_runtime`` carry decisions out (unloads and splits through the
bundles' owners, log lines, trace rows, counters).
"""
