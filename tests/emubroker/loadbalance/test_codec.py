"""Load data as JSON, in the shape Pulsar's Jackson mapper reads and writes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.loadbalance.model.codec import LoadDataDecodeError, decode, encode
from emubroker.loadbalance.model.data import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
    default_bundle_stats,
)
from emubroker.loadbalance.model.extensible_data import (
    BrokerLoadData,
    BundleLoadData,
    TopBundlesLoadData,
)
from emubroker.loadbalance.model.usage import ResourceUsage

BUNDLE = "pulsar/pulsar/10.244.2.23:8080/0x00000000_0xffffffff"
# A report written by a Pulsar 2.11 broker (Pulsar's LocalBrokerDataTest), unknown and
# ignored properties (bundleStats, maxResourceUsage, loadReportType) included.
PULSAR_REPORT = (
    '{"webServiceUrl":"http://10.244.2.23:8080","webServiceUrlTls":"https://10.244.2.23:8081",'
    '"pulsarServiceUrlTls":"pulsar+ssl://10.244.2.23:6651","persistentTopicsEnabled":true,'
    '"nonPersistentTopicsEnabled":false,"cpu":{"usage":3.1577712104798255,"limit":100.0},'
    '"memory":{"usage":614.0,"limit":1228.0},"directMemory":{"usage":32.0,"limit":1228.0},'
    '"bandwidthIn":{"usage":0.0,"limit":0.0},"bandwidthOut":{"usage":0.0,"limit":0.0},'
    '"msgThroughputIn":0.0,"msgThroughputOut":0.0,"msgRateIn":0.0,"msgRateOut":0.0,'
    '"lastUpdate":1650886425227,"lastStats":{"' + BUNDLE + '":{"msgRateIn":0.0,'
    '"msgThroughputIn":0.0,"msgRateOut":0.0,"msgThroughputOut":0.0,"consumerCount":0,'
    '"producerCount":0,"topics":1,"cacheSize":0}},"numTopics":1,"numBundles":1,'
    '"numConsumers":0,"numProducers":0,"bundles":["' + BUNDLE + '"],"lastBundleGains":[],'
    '"lastBundleLosses":[],"brokerVersionString":"2.11.0-hw-0.0.4-SNAPSHOT","protocols":{},'
    '"advertisedListeners":{},"bundleStats":{"' + BUNDLE + '":{"msgRateIn":0.0,'
    '"msgThroughputIn":0.0,"msgRateOut":0.0,"msgThroughputOut":0.0,"consumerCount":0,'
    '"producerCount":0,"topics":1,"cacheSize":0}},"maxResourceUsage":0.49645519256591797,'
    '"loadReportType":"LocalBrokerData"}'
).encode()


def test_reads_a_pulsar_report() -> None:
    report = decode(PULSAR_REPORT, LocalBrokerData)
    assert report.memory == ResourceUsage(614.0, 1228.0)
    assert report.memory.percent_usage() == pytest.approx(50.0, abs=1e-4)
    assert report.pulsar_service_url is None  # absent in the JSON
    assert report.non_persistent_topics_enabled is False
    assert report.last_stats[BUNDLE] == NamespaceBundleStats(topics=1)
    assert report.bundles == {BUNDLE}
    assert report.last_update == 1650886425227
    assert report.broker_version_string == "2.11.0-hw-0.0.4-SNAPSHOT"


def test_reads_time_average_broker_data() -> None:
    data = decode(
        b'{"shortTermMsgThroughputIn":100,"shortTermMsgThroughputOut":200,'
        b'"shortTermMsgRateIn":300,"shortTermMsgRateOut":400,"longTermMsgThroughputIn":567.891,'
        b'"longTermMsgThroughputOut":678.912,"longTermMsgRateIn":789.123,'
        b'"longTermMsgRateOut":890.123}',
        TimeAverageBrokerData,
    )
    assert (data.short_term_msg_throughput_in, data.short_term_msg_rate_out) == (100.0, 400.0)
    assert data.long_term_msg_rate_out == 890.123


def test_writes_what_jackson_writes() -> None:
    report = LocalBrokerData(
        web_service_url="http://b:8080",
        pulsar_service_url="pulsar://b:6650",
        cpu=ResourceUsage(30, 100),
        bundles={"t/n/0x80000000_0xffffffff", "t/n/0x00000000_0x80000000"},
        msg_rate_in=5,
    )
    written = json.loads(encode(report))
    assert "bundleStats" not in written
    assert "webServiceUrlTls" not in written  # null: NON_NULL leaves it out
    assert list(written)[:4] == [
        "webServiceUrl",
        "pulsarServiceUrl",
        "persistentTopicsEnabled",
        "nonPersistentTopicsEnabled",
    ]
    assert list(written)[-2:] == ["maxResourceUsage", "loadReportType"]
    assert written["loadReportType"] == "LocalBrokerData"
    assert written["maxResourceUsage"] == pytest.approx(0.3, rel=1e-6)
    assert written["bundles"] == ["t/n/0x00000000_0x80000000", "t/n/0x80000000_0xffffffff"]
    assert b'"cpu":{"usage":30.0,"limit":100.0}' in encode(report)  # doubles keep ".0"
    assert b'"msgRateIn":5.0' in encode(report)


def test_bundle_data_shape() -> None:
    written = json.loads(encode(BundleData.initial(default_stats=default_bundle_stats())))
    assert written == {
        "shortTermData": {
            "maxSamples": 10,
            "numSamples": 0,
            "msgThroughputIn": 50000.0,
            "msgThroughputOut": 50000.0,
            "msgRateIn": 50.0,
            "msgRateOut": 50.0,
        },
        "longTermData": {
            "maxSamples": 1000,
            "numSamples": 0,
            "msgThroughputIn": 50000.0,
            "msgThroughputOut": 50000.0,
            "msgRateIn": 50.0,
            "msgRateOut": 50.0,
        },
        "topics": 0,
    }


def test_extensible_data_shapes() -> None:
    load = json.loads(encode(BrokerLoadData()))
    assert load["weightedMaxEMA"] == 1.0
    assert load["msgThroughputEMA"] == 0.0
    assert "maxResourceUsage" in load
    assert "bundleCount" in load
    top = TopBundlesLoadData([BundleLoadData("t/n/0x00000000_0xffffffff")])
    assert json.loads(encode(top)) == {
        "topBundlesLoadData": [
            {
                "bundleName": "t/n/0x00000000_0xffffffff",
                "stats": json.loads(encode(NamespaceBundleStats())),
            }
        ]
    }


rates = st.floats(0, 1e12, allow_nan=False)


@given(
    st.builds(
        LocalBrokerData,
        web_service_url=st.none() | st.text(max_size=20),
        cpu=st.builds(ResourceUsage, rates, rates),
        msg_rate_in=rates,
        last_update=st.integers(0, 2**62),
        last_stats=st.dictionaries(
            st.text(max_size=10), st.builds(NamespaceBundleStats, msg_rate_in=rates), max_size=3
        ),
        bundles=st.sets(st.text(max_size=10), max_size=3),
        protocols=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    )
)
def test_round_trip(report: LocalBrokerData) -> None:
    decoded = decode(encode(report), LocalBrokerData)
    assert decoded == report


@pytest.mark.parametrize("data", [b"not json", b'{"cpu": "high"}', b"[]"])
def test_bad_nodes_raise_a_clear_error(data: bytes) -> None:
    with pytest.raises(LoadDataDecodeError, match="LocalBrokerData"):
        decode(data, LocalBrokerData)
