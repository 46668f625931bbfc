"""``emubroker admin``: which REST call each pulsar-admin-shaped command makes, and its output."""

from __future__ import annotations

import argparse
import http.server
import threading
from typing import Any

import pytest

from emubroker import admin_cli
from emubroker.__main__ import main
from emubroker.adminclient.errors import describe_status


class FakeClient(admin_cli.AdminClient):
    """Records calls instead of sending them; answers from a table."""

    def __init__(self, answers: dict[tuple[str, str], Any] | None = None) -> None:
        super().__init__("http://fake:8080")
        self.calls: list[tuple[str, str, Any]] = []
        self.answers = answers or {}

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> Any:
        self.calls.append((method, path, body))
        answer = self.answers.get((method, path))
        if isinstance(answer, Exception):
            raise answer
        return answer


def run(*argv: str, client: FakeClient | None = None) -> FakeClient:
    parser = argparse.ArgumentParser()
    admin_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["admin", *argv])
    fake = client or FakeClient()
    args.run(fake, args)
    return fake


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (["clusters", "list"], ("GET", "/admin/v2/clusters", None)),
        (["tenants", "delete", "acme"], ("DELETE", "/admin/v2/tenants/acme", None)),
        (
            ["tenants", "create", "acme", "-c", "standalone", "-r", "ops,dev"],
            (
                "PUT",
                "/admin/v2/tenants/acme",
                {"adminRoles": ["ops", "dev"], "allowedClusters": ["standalone"]},
            ),
        ),
        (
            ["namespaces", "create", "acme/ns", "-b", "8"],
            ("PUT", "/admin/v2/namespaces/acme/ns", {"bundles": {"numBundles": 8}}),
        ),
        (["namespaces", "create", "acme/ns"], ("PUT", "/admin/v2/namespaces/acme/ns", None)),
        (
            ["namespaces", "bundles", "acme/ns"],
            ("GET", "/admin/v2/namespaces/acme/ns/bundles", None),
        ),
        (
            ["namespaces", "split-bundle", "acme/ns", "-b", "0x00000000_0x40000000"],
            ("PUT", "/admin/v2/namespaces/acme/ns/0x00000000_0x40000000/split?unload=false", None),
        ),
        (
            [
                "namespaces",
                "split-bundle",
                "acme/ns",
                "--bundle",
                "0x00000000_0xffffffff",
                "--unload",
                "--split-algorithm-name",
                "specified_positions_divide",
                "--split-boundaries",
                "0x10000000,100",
                "-sb",
                "7",
            ],
            (
                "PUT",
                "/admin/v2/namespaces/acme/ns/0x00000000_0xffffffff/split"
                "?unload=true&splitAlgorithmName=specified_positions_divide",
                [0x10000000, 100, 7],
            ),
        ),
        (
            ["namespaces", "split-bundle", "acme/ns", "-bt", "LARGEST", "-u", "-san", "x"],
            (
                "PUT",
                "/admin/v2/namespaces/acme/ns/LARGEST/split?unload=true&splitAlgorithmName=x",
                None,
            ),
        ),
        (
            ["namespaces", "set-deduplication", "acme/ns", "--enable"],
            ("POST", "/admin/v2/namespaces/acme/ns/deduplication", True),
        ),
        (
            ["topics", "create-partitioned-topic", "acme/ns/t", "-p", "4"],
            ("PUT", "/admin/v2/persistent/acme/ns/t/partitions", 4),
        ),
        (
            ["topics", "update-partitioned-topic", "persistent://acme/ns/t", "-p", "6"],
            ("POST", "/admin/v2/persistent/acme/ns/t/partitions", 6),
        ),
        (
            ["topics", "delete", "non-persistent://acme/ns/t", "-f"],
            ("DELETE", "/admin/v2/non-persistent/acme/ns/t?force=true", None),
        ),
        (["topics", "stats", "t"], ("GET", "/admin/v2/persistent/public/default/t/stats", None)),
        (
            ["topics", "stats-internal", "t"],
            ("GET", "/admin/v2/persistent/public/default/t/internalStats", None),
        ),
        (
            ["topics", "partitioned-stats", "t", "--per-partition"],
            (
                "GET",
                "/admin/v2/persistent/public/default/t/partitioned-stats?perPartition=true",
                None,
            ),
        ),
        (
            ["topics", "create-subscription", "t", "-s", "my sub", "-m", "1:2"],
            (
                "PUT",
                "/admin/v2/persistent/public/default/t/subscription/my%20sub",
                {"ledgerId": 1, "entryId": 2},
            ),
        ),
        (
            ["topics", "unsubscribe", "t", "-s", "s", "-f"],
            ("DELETE", "/admin/v2/persistent/public/default/t/subscription/s?force=true", None),
        ),
        (
            ["topics", "skip", "t", "-s", "s", "-n", "3"],
            ("POST", "/admin/v2/persistent/public/default/t/subscription/s/skip/3", None),
        ),
        (
            ["topics", "reset-cursor", "t", "-s", "s", "-m", "earliest"],
            (
                "POST",
                "/admin/v2/persistent/public/default/t/subscription/s/resetcursor",
                "earliest",
            ),
        ),
        (["topics", "unload", "t"], ("PUT", "/admin/v2/persistent/public/default/t/unload", None)),
        (["brokers", "list", "standalone"], ("GET", "/admin/v2/brokers/standalone", None)),
        (["brokers", "healthcheck"], ("GET", "/admin/v2/brokers/health", None)),
        (["brokers", "leader-broker"], ("GET", "/admin/v2/brokers/leaderBroker", None)),
        (
            [
                "brokers",
                "update-dynamic-config",
                "--config",
                "defaultNumPartitions",
                "--value",
                "3",
            ],
            ("POST", "/admin/v2/brokers/configuration/defaultNumPartitions/3", None),
        ),
    ],
)
def test_commands_make_pulsars_rest_calls(argv: list[str], call: tuple[str, str, Any]) -> None:
    assert run(*argv).calls == [call]


def test_topic_list_covers_both_domains() -> None:
    fake = FakeClient(
        {
            ("GET", "/admin/v2/persistent/acme/ns"): ["persistent://acme/ns/a"],
            ("GET", "/admin/v2/non-persistent/acme/ns"): ["non-persistent://acme/ns/b"],
        }
    )
    parser = argparse.ArgumentParser()
    admin_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["admin", "topics", "list", "acme/ns"])
    assert args.run(fake, args) == ["persistent://acme/ns/a", "non-persistent://acme/ns/b"]


def test_tenant_without_clusters_gets_every_cluster() -> None:
    fake = FakeClient({("GET", "/admin/v2/clusters"): ["c1", "c2"]})
    run("tenants", "create", "acme", client=fake)
    assert fake.calls[-1] == (
        "PUT",
        "/admin/v2/tenants/acme",
        {"adminRoles": [], "allowedClusters": ["c1", "c2"]},
    )


def test_tenant_update_keeps_what_it_does_not_name() -> None:
    # As pulsar-admin's `tenants update public -r anonymous`: the clusters stay as they are.
    fake = FakeClient(
        {
            ("GET", "/admin/v2/tenants/public"): {
                "adminRoles": ["ops"],
                "allowedClusters": ["standalone"],
            },
            ("GET", "/admin/v2/clusters"): ["standalone", "other"],
        }
    )
    run("tenants", "update", "public", "-r", "anonymous", client=fake)
    assert fake.calls[-1] == (
        "POST",
        "/admin/v2/tenants/public",
        {"adminRoles": ["anonymous"], "allowedClusters": ["standalone"]},
    )
    run("tenants", "update", "public", "-c", "other", client=fake)
    assert fake.calls[-1] == (
        "POST",
        "/admin/v2/tenants/public",
        {"adminRoles": ["ops"], "allowedClusters": ["other"]},
    )


def test_reset_cursor_to_a_relative_time() -> None:
    fake = run("topics", "reset-cursor", "t", "-s", "s", "-t", "10m")
    method, path, _ = fake.calls[0]
    timestamp = int(path.rsplit("/", 1)[1])
    assert method == "POST"
    assert "/subscription/s/resetcursor/" in path
    assert timestamp > 1_600_000_000_000  # a wall-clock time in ms, ten minutes ago


def test_bad_arguments_are_readable_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "topics", "skip", "a/b", "-s", "s", "-n", "1"]) == 1
    assert "invalid topic name" in capsys.readouterr().err
    assert main(["admin", "topics", "create-subscription", "t", "-s", "s", "-m", "soon"]) == 1
    assert "invalid message id 'soon'" in capsys.readouterr().err
    assert main(["admin", "topics", "reset-cursor", "t", "-s", "s", "-t", "ages"]) == 1
    assert "invalid time 'ages'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["admin", "topics", "frobnicate"])
    assert usage.value.code == 2


@pytest.mark.integration
def test_unreachable_broker_is_a_readable_error(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    code = main(["admin", "--admin-url", "http://127.0.0.1:1", "clusters", "list"])
    assert code == 1
    assert capsys.readouterr().err.startswith("error: cannot reach http://127.0.0.1:1")


def test_error_bodies_are_described_with_status_and_reason() -> None:
    assert (
        describe_status(404, '{"reason": "Namespace does not exist"}')
        == "404 Not Found: Namespace does not exist"
    )
    assert describe_status(500, "boom") == "500 Internal Server Error: boom"
    assert describe_status(599, "") == "599 Error"


class FakeMessages(FakeClient):
    """Answers message reads from a table of path -> (headers, payload); others are 404."""

    def __init__(self, messages: dict[str, tuple[dict[str, str], bytes]]) -> None:
        super().__init__()
        self.messages = messages
        self.paths: list[str] = []

    def message(self, path: str) -> tuple[dict[str, str], bytes]:
        self.paths.append(path)
        if path not in self.messages:
            raise admin_cli.AdminError("404 Not Found: Message not found")
        return self.messages[path]


def show(*argv: str, client: FakeMessages) -> str:
    parser = argparse.ArgumentParser()
    admin_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["admin", *argv])
    result: str = args.run(client, args)
    return result


TOPIC = "/admin/v2/persistent/public/default/t"


def test_message_commands_call_pulsars_paths_and_print_id_headers_and_payload() -> None:
    headers = {"X-Pulsar-Message-ID": "3:0", "X-Pulsar-publish-time": "2026-11-22T00:00:00Z"}
    fake = FakeMessages(
        {
            f"{TOPIC}/subscription/s/position/1": (headers, b"hello"),
            f"{TOPIC}/examinemessage?initialPosition=earliest&messagePosition=2": (
                {"X-Pulsar-Message-ID": "3:1"},
                b"\xff\x00",
            ),
            f"{TOPIC}/ledger/3/entry/0": (headers, b"hello"),
        }
    )
    # Asked for three, only one is there: pulsar-admin shows what exists.
    peeked = show("topics", "peek-messages", "t", "-s", "s", "-n", "3", client=fake)
    assert peeked == "Message ID: 3:0\nX-Pulsar-publish-time: 2026-11-22T00:00:00Z\n\nhello"
    assert fake.paths[-2:] == [
        f"{TOPIC}/subscription/s/position/1",
        f"{TOPIC}/subscription/s/position/2",
    ]
    examined = show("topics", "examine-message", "t", "-i", "earliest", "-m", "2", client=fake)
    assert examined == "Message ID: 3:1\n\nff 00"  # not UTF-8: shown as hex
    assert show("topics", "get-message-by-id", "t", "-l", "3", "-e", "0", client=fake) == peeked
    with pytest.raises(admin_cli.AdminError, match="Message not found"):
        show("topics", "peek-messages", "t", "-s", "other", client=fake)


@pytest.mark.integration  # two loopback HTTP servers
def test_redirects_to_the_owning_broker_are_followed_with_method_and_body() -> None:
    seen: list[tuple[int, str, str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            port: int = self.connection.getsockname()[1]
            seen.append((port, self.command, self.path, body))
            if port == first.server_address[1]:
                self.send_response(307)
                self.send_header(
                    "Location", f"http://127.0.0.1:{owner.server_address[1]}{self.path}"
                )
                self.end_headers()
            else:
                self.send_response(204)
                self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    first = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    owner = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (first, owner)]
    for thread in threads:
        thread.start()
    try:
        client = admin_cli.AdminClient(f"http://127.0.0.1:{first.server_address[1]}")
        assert client.call("PUT", "/admin/v2/namespaces/a/b/0x0_0x1/split", [5]) is None
    finally:
        for server in (first, owner):
            server.shutdown()
            server.server_close()
    path = "/admin/v2/namespaces/a/b/0x0_0x1/split"
    assert seen == [
        (first.server_address[1], "PUT", path, b"[5]"),
        (owner.server_address[1], "PUT", path, b"[5]"),
    ]
