"""Policies: what the admin API sets and the broker obeys, in Pulsar's JSON shapes.

* :mod:`~emubroker.policies.namespaces`: clusters, tenants and namespace ``Policies``, and the
  typed store the admin API writes them through;
* :mod:`~emubroker.policies.topics`: topic policies (``TopicPolicies``) and the broker's view.

Where each lives in the metadata store is :mod:`emubroker.metadata.paths`.
"""

from __future__ import annotations

from emubroker.policies.namespaces import (
    AuthAction,
    AuthPolicies,
    BundlesData,
    ClusterData,
    Policies,
    PolicyExistsError,
    PolicyNotFoundError,
    PolicyStore,
    PolicyStoreError,
    SchemaCompatibilityStrategy,
    TenantInfo,
    bundles_data,
    decode_policies,
    default_policies,
    to_json,
)
from emubroker.policies.topics import SubscriptionPolicies, TopicPolicies, TopicPolicyView

__all__ = [
    "AuthAction",
    "AuthPolicies",
    "BundlesData",
    "ClusterData",
    "Policies",
    "PolicyExistsError",
    "PolicyNotFoundError",
    "PolicyStore",
    "PolicyStoreError",
    "SchemaCompatibilityStrategy",
    "SubscriptionPolicies",
    "TenantInfo",
    "TopicPolicies",
    "TopicPolicyView",
    "bundles_data",
    "decode_policies",
    "default_policies",
    "to_json",
]
