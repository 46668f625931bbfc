"""Differential conformance: the same scenarios against Apache Pulsar standalone and emubroker.

``python -m conformance`` (or ``scripts/differential``) starts both brokers once with the same
``broker.conf`` keys (``conformance/broker.conf``), runs every scenario of
:mod:`conformance.scenarios` against each with the official Python client and the admin REST API,
normalises what must differ (timestamps, addresses, ids, versions), diffs the two records and
checks each difference against ``conformance/allowed.toml``. See docs/compatibility.md.
"""
