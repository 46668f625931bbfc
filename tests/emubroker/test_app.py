"""The composition root and the CLI: bootstrap, namespaces, ports, admin endpoints, signals."""

from __future__ import annotations

import functools
import json
import signal
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from emubroker.__main__ import main
from emubroker.app import DEFAULT_NAMESPACES, Broker, open_broker
from emubroker.config import load_config
from emubroker.naming import NamespaceName, TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import TopicNotFoundError
from tests.support.broker import WireClient, memory_stream_pair, standalone_process

pytestmark = pytest.mark.anyio


@pytest.fixture
async def broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    async with open_broker(clock=fake_clock, listen=False, admin=False) as running:
        yield running


# ---- composition (component, both backends) -----------------------------------------------


async def test_bootstrap_writes_pulsar_metadata_layout(broker: Broker) -> None:
    cluster = await broker.metadata.get("/admin/clusters/standalone")
    assert cluster is not None
    assert json.loads(cluster.value)["brokerServiceUrl"] == "pulsar://127.0.0.1:6650"
    # Pulsar's standalone creates the tenants public and pulsar (pulsar-admin tenants list).
    for name in ("public", "pulsar"):
        tenant = await broker.metadata.get(f"/admin/policies/{name}")
        assert tenant is not None, name
        assert json.loads(tenant.value)["allowedClusters"] == ["standalone"]
    assert NamespaceName("pulsar", "system") in DEFAULT_NAMESPACES
    for namespace in DEFAULT_NAMESPACES:
        policies = await broker.metadata.get(f"/admin/policies/{namespace}")
        assert policies is not None
        bundles = json.loads(policies.value)["bundles"]
        assert bundles["numBundles"] == 4
        assert bundles["boundaries"][0] == "0x00000000"
        assert bundles["boundaries"][-1] == "0xffffffff"
    assert broker.namespaces.namespaces() == list(DEFAULT_NAMESPACES)


async def test_namespace_registry_follows_the_metadata_store(broker: Broker) -> None:
    new = NamespaceName("acme", "orders")
    assert not broker.namespaces.exists(new)
    with pytest.raises(TopicNotFoundError):
        await broker.topics.get_topic(TopicName.parse("persistent://acme/orders/t"))
    await broker.metadata.put("/admin/policies/acme/orders", b"{}")
    await anyio.wait_all_tasks_blocked()
    assert broker.namespaces.exists(new)
    topic = await broker.topics.get_topic(TopicName.parse("persistent://acme/orders/t"))
    assert str(topic.name) == "persistent://acme/orders/t"
    await broker.metadata.delete("/admin/policies/acme/orders")
    await anyio.wait_all_tasks_blocked()
    assert not broker.namespaces.exists(new)


async def test_existing_metadata_is_not_overwritten(fake_clock: FakeClock) -> None:
    from emubroker.metadata import MemoryMetadataStore

    async with MemoryMetadataStore() as store:
        await store.put("/admin/policies/public/default", b'{"mine": true}')
        async with open_broker(clock=fake_clock, metadata=store, listen=False, admin=False):
            node = await store.get("/admin/policies/public/default")
            assert node is not None
            assert node.value == b'{"mine": true}'


async def test_brokers_bootstrapping_an_empty_store_together_overwrite_nothing() -> None:
    # Several brokers of a cluster start at once against one empty metadata store: each node
    # is created by exactly one of them and never rewritten by the others.
    from emubroker.app import bootstrap_metadata
    from emubroker.metadata import MemoryMetadataTree

    tree = MemoryMetadataTree()
    stores = [tree.open_session() for _ in range(3)]
    async with anyio.create_task_group() as tg:
        for index, store in enumerate(stores):
            config = load_config(
                overrides={"brokerServicePort": 6650 + index, "webServicePort": 8080 + index}
            )
            tg.start_soon(
                functools.partial(
                    bootstrap_metadata, store, config, http_url=f"http://127.0.0.1:{8080 + index}"
                )
            )
    paths = ["/admin/clusters/standalone", "/admin/policies/public"]
    paths += [f"/admin/policies/{namespace}" for namespace in DEFAULT_NAMESPACES]
    for path in paths:
        node = await stores[0].get(path)
        assert node is not None, path
        assert node.version == 0, path
    for store in stores:
        await store.aclose()


@pytest.mark.parametrize(("alone", "partitions"), [(False, 16), (True, 0)])
async def test_a_cluster_member_bootstraps_the_transaction_coordinators_topic(
    fake_clock: FakeClock, alone: bool, partitions: int
) -> None:
    # `pulsar initialize-cluster-metadata` creates it (16 partitions) even with transactions
    # disabled, `pulsar standalone` only with them enabled: a client enabling transactions
    # against a cluster is then told so by a coordinator, not by an empty partition count.
    client_end, server_end = memory_stream_pair()
    client = WireClient(client_end)
    try:
        async with open_broker(clock=fake_clock, listen=False, admin=False, alone=alone) as running:
            running.start_session(server_end)
            await client.handshake()
            await client.send(
                c.PartitionedTopicMetadata(
                    topic="persistent://pulsar/system/transaction_coordinator_assign",
                    request_id=1,
                )
            )
            answer = await client.receive_command()
            assert isinstance(answer, c.PartitionedTopicMetadataResponse)
            assert answer.partitions == partitions
    finally:
        await client_end.aclose()


async def test_leaving_open_broker_closes_every_connection(fake_clock: FakeClock) -> None:
    client_end, server_end = memory_stream_pair()
    client = WireClient(client_end)
    try:
        async with open_broker(clock=fake_clock, listen=False, admin=False) as running:
            running.start_session(server_end)
            await client.handshake()
        await client.expect_closed()
    finally:
        await client_end.aclose()


# ---- real sockets -------------------------------------------------------------------------


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


# These serve the admin API too, and aiohttp runs on asyncio only.
asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@pytest.mark.integration
@asyncio_only
async def test_localhost_serves_ipv4_and_ipv6_on_the_same_free_port() -> None:
    config = load_config(overrides={"brokerServicePort": 0, "webServicePort": 0})
    async with open_broker(config) as running:
        port = running.config.brokerServicePort
        assert port != 0
        assert running.service_url == f"pulsar://127.0.0.1:{port}"
        hosts = ["127.0.0.1"] + (["::1"] if _ipv6_loopback() else [])
        for host in hosts:
            async with await anyio.connect_tcp(host, port) as stream:
                connected = await WireClient(stream).handshake()
                assert connected.server_version.startswith("emubroker")


@pytest.mark.integration
@asyncio_only
async def test_health_and_metrics_endpoints() -> None:
    import aiohttp

    config = load_config(overrides={"brokerServicePort": 0, "webServicePort": 0})
    async with open_broker(config) as running:
        async with await anyio.connect_tcp("127.0.0.1", running.config.brokerServicePort) as s:
            client = WireClient(s)
            await client.handshake()
            await client.send(c.Producer(topic="m", producer_id=0, request_id=0))
            assert isinstance(await client.receive_command(), c.ProducerSuccess)
            await client.send_message(0, 0, b"12345")
            assert isinstance(await client.receive_command(), c.SendReceipt)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{running.admin_url}/admin/v2/brokers/health") as response:
                assert response.status == 200
                assert await response.text() == "ok"
            async with http.get(f"{running.admin_url}/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = await response.text()
    labels = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/m"'
    assert 'pulsar_topics_count{cluster="standalone",namespace="public/default"} 1' in text
    assert f"pulsar_in_messages_total{{{labels}}} 1" in text
    assert f"pulsar_producers_count{{{labels}}} 0" in text  # closed with the connection
    assert "# TYPE pulsar_rate_in gauge" in text


# ---- the CLI ------------------------------------------------------------------------------


def test_cli_unknown_config_key_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePort=0\nnoSuchSetting=1\n")
    assert main(["standalone", "--config", str(conf)]) == 2
    assert "noSuchSetting" in capsys.readouterr().err


def test_cli_invalid_value_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text('maxMessageSize = "big"\n')
    assert main(["standalone", "--config", str(conf)]) == 2
    assert "maxMessageSize" in capsys.readouterr().err


def _standalone_scratch_dirs(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], list[str]]:
    """Run ``main(argv)`` with temporary files under ``tmp_path`` and a broker that returns at once.

    Returns the ``emubroker-tls-*`` directories seen while the broker "ran", and those left after.
    """
    import emubroker.__main__ as cli

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    during: list[str] = []

    async def serve(config: object, args: object) -> None:
        during.extend([p.name async for p in anyio.Path(tmp_path).glob("emubroker-tls-*")])

    monkeypatch.setattr(cli, "_standalone", serve)
    assert main(argv) == 0
    return during, [p.name for p in tmp_path.glob("emubroker-tls-*")]


def test_cli_without_tls_makes_no_scratch_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory made at every start stays behind whenever a run ends by SIGKILL.
    during, after = _standalone_scratch_dirs(
        ["standalone", "--port", "0", "--admin-port", "0"], tmp_path, monkeypatch
    )
    assert (during, after) == ([], [])


def test_cli_tls_certificates_live_in_a_scratch_directory_removed_on_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePortTls=0\nwebServicePortTls=0\n")
    during, after = _standalone_scratch_dirs(
        ["standalone", "--tls", "--config", str(conf)], tmp_path, monkeypatch
    )
    assert len(during) == 1
    assert after == []
    assert f"TLS certificates for this run in {tmp_path / during[0]}" in capsys.readouterr().out


@pytest.mark.integration
def test_cli_port_in_use_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["standalone", "--port", str(port), "--admin-port", "0", "--bind", "127.0.0.1"])
    assert code == 1
    assert "cannot start" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_prints_ready_and_stops_cleanly_on_signals(sig: signal.Signals) -> None:
    with standalone_process() as proc:
        assert proc.service_url.startswith("pulsar://127.0.0.1:")
        assert proc.admin_url.startswith("http://127.0.0.1:")
        assert not proc.service_url.endswith(":0")
        assert proc.stop(sig) == 0
    assert any(f"{sig.name} received" in line for line in proc.output)
