"""A topic's partitions come over the binary protocol; the admin REST API only creates topics."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen.__main__ import main
from tests.support.broker import standalone_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[str, str]]:
    with standalone_process() as proc:
        yield proc.service_url, proc.admin_url


@pytest.fixture
def closed_url() -> str:
    """An HTTP URL on a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(tmp_path: Path, service_url: str, *args: str) -> int:
    return main(
        [
            "produce",
            *args,
            "-u",
            service_url,
            "-r",
            "60",
            "-time",
            "1",
            "--warmup-time",
            "0",
            "--no-dashboard",
            "--trace-dir",
            str(tmp_path / "run"),
        ]
    )


def test_a_produce_learns_partitions_from_the_broker_without_an_admin_url(
    broker, tmp_path, closed_url, capsys
) -> None:
    service_url, admin_url = broker
    partitioned, plain = unique("lg-parted"), unique("lg-plain")
    status, _ = rest_call(
        admin_url, "PUT", f"/admin/v2/persistent/public/default/{partitioned}/partitions", 3
    )
    assert status == 204
    code = produce(tmp_path, service_url, partitioned, plain, "--admin-url", closed_url)
    assert code == 0, capsys.readouterr()
    sends = pq.read_table(tmp_path / "run" / "sends").to_pylist()
    by_topic = {(row["topic"], row["partition"]) for row in sends}
    assert by_topic == {
        *((f"persistent://public/default/{partitioned}-partition-{i}", i) for i in range(3)),
        (f"persistent://public/default/{plain}", -1),
    }


def test_creating_partitions_needs_the_admin_url_and_says_which_option(
    broker, tmp_path, closed_url, capsys
) -> None:
    service_url, _admin_url = broker
    topic = unique("lg-create")
    code = produce(tmp_path, service_url, topic, "-np", "2", "--admin-url", closed_url)
    output = capsys.readouterr().err
    assert code == 3
    assert output.count("\n") == 1
    assert f"no admin REST API answers at {closed_url}" in output
    assert "give the cluster's with --admin-url" in output
    code = produce(tmp_path, service_url, topic, "-np", "2", "--admin-url", "")
    output = capsys.readouterr().err
    assert code == 3
    assert output == (
        f"loadgen: preparing the topics failed: creating persistent://public/default/{topic} "
        "with 2 partitions needs the admin REST API: give its URL with --admin-url "
        "(in a scenario: cluster.admin_url)\n"
    )
