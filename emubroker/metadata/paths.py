"""Every metadata-store path the broker reads or writes: Pulsar's layout, in one place.

The names are Pulsar's (spec/pulsar-behaviour.md §6.1 for the load manager and ownership nodes,
its ``*Resources`` classes for the rest), so that a tree written by us reads like one written by
Pulsar. Local names of topics are URL-encoded in paths (``TopicName.encoded_local_name``), as
Pulsar's ``getPersistenceNamingEncoding`` does. Pure: names only; reading the tree is
:mod:`emubroker.metadata.walk`'s job.

======================================================  ===========================================
path                                                    what it holds
======================================================  ===========================================
``/admin/clusters/<cluster>``                           ``ClusterData``
``/admin/policies/<tenant>``                            ``TenantInfo``
``/admin/policies/<tenant>/<ns>``                       namespace ``Policies``
``/admin/local-policies/<tenant>/<ns>``                 ``LocalPolicies`` (bundle boundaries)
``/admin/partitioned-topics/<tenant>/<ns>/<domain>/<t>`` ``PartitionedTopicMetadata``
``/admin/topic-policies/<tenant>/<ns>/<domain>/<t>``    ``TopicPolicies`` (Pulsar: a system topic)
``/admin/configuration``                                dynamic configuration
``/managed-ledgers/<tenant>/<ns>/<domain>/<t>[/<sub>]`` managed ledger, its cursors
``/schemas/<tenant>/<ns>/<t>``                          schema history
``/namespace/<tenant>/<ns>/<range>``                    bundle ownership (ephemeral lock)
``/loadbalance/leader``                                 the elected leader (ephemeral)
``/loadbalance/brokers/<broker>``                       ``LocalBrokerData`` (ephemeral)
``/loadbalance/bundle-data/<tenant>/<ns>/<range>``      ``BundleData``
``/loadbalance/broker-time-average/<broker>``           ``TimeAverageBrokerData``
======================================================  ===========================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import quote

if TYPE_CHECKING:
    from emubroker.naming import NamespaceBundle, NamespaceName, TopicName

__all__ = [
    "BROKER_TIME_AVERAGE_ROOT",
    "BUNDLE_DATA_ROOT",
    "CLUSTERS_ROOT",
    "DYNAMIC_CONFIGURATION_PATH",
    "LEADER_PATH",
    "LOAD_REPORTS_ROOT",
    "LOCAL_POLICIES_ROOT",
    "MANAGED_LEDGERS_ROOT",
    "OWNERSHIP_ROOT",
    "PARTITIONED_TOPICS_ROOT",
    "POLICIES_ROOT",
    "SCHEMAS_ROOT",
    "TOPIC_POLICIES_ROOT",
    "broker_time_average_path",
    "bundle_data_path",
    "cluster_path",
    "cursor_path",
    "load_report_path",
    "local_policies_path",
    "managed_ledger_path",
    "namespace_path",
    "ownership_path",
    "partitioned_topic_path",
    "schema_path",
    "tenant_path",
    "topic_path",
    "topic_policies_path",
]

# ---- admin resources (Pulsar's PulsarResources) ----------------------------------------------

CLUSTERS_ROOT: Final = "/admin/clusters"
POLICIES_ROOT: Final = "/admin/policies"
"""Tenants (``<root>/<tenant>``) and their namespaces' policies (``<root>/<tenant>/<ns>``)."""
LOCAL_POLICIES_ROOT: Final = "/admin/local-policies"
PARTITIONED_TOPICS_ROOT: Final = "/admin/partitioned-topics"
TOPIC_POLICIES_ROOT: Final = "/admin/topic-policies"
"""Ours: Pulsar keeps topic policies in the ``__change_events`` system topic
(docs/broker-behaviour.md)."""
DYNAMIC_CONFIGURATION_PATH: Final = "/admin/configuration"

# ---- storage -----------------------------------------------------------------------------------

MANAGED_LEDGERS_ROOT: Final = "/managed-ledgers"
SCHEMAS_ROOT: Final = "/schemas"

# ---- ownership and the load manager (spec §6.1) ----------------------------------------------

OWNERSHIP_ROOT: Final = "/namespace"
LEADER_PATH: Final = "/loadbalance/leader"
LOAD_REPORTS_ROOT: Final = "/loadbalance/brokers"
BUNDLE_DATA_ROOT: Final = "/loadbalance/bundle-data"
BROKER_TIME_AVERAGE_ROOT: Final = "/loadbalance/broker-time-average"


def cluster_path(cluster: str) -> str:
    """A cluster's ``ClusterData``."""
    return f"{CLUSTERS_ROOT}/{cluster}"


def tenant_path(tenant: str) -> str:
    """A tenant's ``TenantInfo``."""
    return f"{POLICIES_ROOT}/{tenant}"


def namespace_path(namespace: NamespaceName | str) -> str:
    """A namespace's ``Policies`` (``tenant/ns``)."""
    return f"{POLICIES_ROOT}/{namespace}"


def local_policies_path(namespace: NamespaceName) -> str:
    """A namespace's ``LocalPolicies``."""
    return f"{LOCAL_POLICIES_ROOT}/{namespace}"


def topic_path(root: str, topic: TopicName) -> str:
    """``<root>/<tenant>/<ns>/<domain>/<encoded local name>``: the shape of every per-topic node."""
    return f"{root}/{topic.namespace}/{topic.domain.value}/{topic.encoded_local_name}"


def partitioned_topic_path(topic: TopicName) -> str:
    """A partitioned topic's metadata (its partition count)."""
    return topic_path(PARTITIONED_TOPICS_ROOT, topic)


def topic_policies_path(topic: TopicName) -> str:
    """A (partitioned or non-partitioned) topic's policies."""
    return topic_path(TOPIC_POLICIES_ROOT, topic)


def managed_ledger_path(topic: TopicName) -> str:
    """A topic's managed ledger (its ledger list)."""
    return topic_path(MANAGED_LEDGERS_ROOT, topic)


def cursor_path(topic: TopicName, subscription: str) -> str:
    """One durable subscription's cursor, a child of the managed ledger's node."""
    return f"{managed_ledger_path(topic)}/{quote(subscription, safe='')}"


def schema_path(topic: TopicName) -> str:
    """A topic's schema history: ``tenant/ns/<encoded local name of the partitioned topic>``.

    No domain: Pulsar's schema id (``TopicName.getSchemaName``) is shared by both domains.
    """
    return f"{SCHEMAS_ROOT}/{topic.namespace}/{topic.partitioned_topic_name.encoded_local_name}"


def ownership_path(bundle: NamespaceBundle) -> str:
    """The lock node of a bundle, whose owner holds it: ``/namespace/<tenant>/<ns>/<range>``."""
    return f"{OWNERSHIP_ROOT}/{bundle.namespace}/{bundle.bundle_range.name}"


def load_report_path(broker_id: str) -> str:
    """A broker's ``LocalBrokerData`` (ephemeral, written by that broker)."""
    return f"{LOAD_REPORTS_ROOT}/{broker_id}"


def bundle_data_path(bundle: NamespaceBundle) -> str:
    """A bundle's ``BundleData`` (written by the leader)."""
    return f"{BUNDLE_DATA_ROOT}/{bundle.namespace}/{bundle.bundle_range.name}"


def broker_time_average_path(broker_id: str) -> str:
    """A broker's ``TimeAverageBrokerData`` (written by the leader)."""
    return f"{BROKER_TIME_AVERAGE_ROOT}/{broker_id}"
