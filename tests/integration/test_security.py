"""TLS, authentication and authorization with the official client, on the wire and over REST.

One broker per module with TLS ports, the token, basic and TLS providers and authorization on;
certificates are made for the test (loopback only). Roles: ``root`` (super-user), ``alice``
(token), ``bob`` (basic, a DES crypt hash) and ``admin`` (basic, apr1), ``tls-user`` (client
certificate CN); namespace ``sec/ns`` grants them produce and consume, ``sec/closed`` nobody.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest

from emubroker.auth.certs import LocalCertificates, write_local_certificates
from emubroker.auth.token import create_token
from emubroker.testing import RunningBroker, run_broker_in_thread

pytestmark = pytest.mark.integration

SECRET = bytes(range(32))
PROVIDERS = ",".join(
    f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name}"
    for name in ("Tls", "Token", "Basic")
)
USERS = "bob:ab01FAX.bQRSU\nadmin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n"  # both "123456"
TIMEOUT_MS = 10_000


@dataclass
class Setup:
    broker: RunningBroker
    certs: LocalCertificates
    rogue: LocalCertificates  # a client certificate from another CA


def _token(role: str) -> str:
    return create_token(SECRET, role)


def _rest(
    url: str,
    method: str = "GET",
    body: object = None,
    *,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, _decode(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _decode(exc.read())


def _decode(payload: bytes) -> object:
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload.decode()


def _bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(role)}"}


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("security")
    certs = write_local_certificates(root / "certs", client_role="tls-user")
    rogue = write_local_certificates(root / "rogue", client_role="tls-user")
    (root / "secret.key").write_bytes(SECRET)
    (root / "users").write_text(USERS)
    with run_broker_in_thread(
        brokerServicePortTls=0,
        webServicePortTls=0,
        tlsCertificateFilePath=str(certs.broker_cert),
        tlsKeyFilePath=str(certs.broker_key),
        tlsTrustCertsFilePath=str(certs.ca_cert),
        authenticationEnabled=True,
        authenticationProviders=PROVIDERS,
        authorizationEnabled=True,
        superUserRoles="root",
        tokenSecretKey=f"file://{root}/secret.key",
        basicAuthConf=str(root / "users"),
    ) as running:
        admin = running.admin_url
        root_auth = _bearer("root")
        assert _rest(f"{admin}/admin/v2/clusters/standalone", "PUT", {}, headers=root_auth)[0] in (
            200,
            409,
        )
        status, _ = _rest(
            f"{admin}/admin/v2/tenants/sec",
            "PUT",
            {"adminRoles": ["sec-admin"], "allowedClusters": ["standalone"]},
            headers=root_auth,
        )
        assert status == 204
        everyone = {r: ["produce", "consume"] for r in ("alice", "bob", "admin", "tls-user")}
        for ns, grants in (("ns", everyone), ("closed", {})):
            status, body = _rest(
                f"{admin}/admin/v2/namespaces/sec/{ns}",
                "PUT",
                {"auth_policies": {"namespace_auth": grants}},
                headers=root_auth,
            )
            assert status == 204, body
        yield Setup(running, certs, rogue)


def _topic(ns: str = "ns") -> str:
    return f"persistent://sec/{ns}/t-{uuid.uuid4().hex[:10]}"


def _roundtrip(client: pulsar.Client, topic: str) -> None:
    try:
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)
        producer.send(b"hello")
        assert consumer.receive(TIMEOUT_MS).data() == b"hello"
    finally:
        client.close()


def _client(url: str, **kwargs: object) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=3,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **kwargs,  # type: ignore[arg-type]
    )


# ---- token -------------------------------------------------------------------------------------


def test_token_on_the_wire(setup: Setup) -> None:
    _roundtrip(
        _client(
            setup.broker.service_url, authentication=pulsar.AuthenticationToken(_token("alice"))
        ),
        _topic(),
    )


def test_token_over_http_lookup(setup: Setup) -> None:
    auth = pulsar.AuthenticationToken(lambda: _token("alice"))
    _roundtrip(_client(setup.broker.admin_url, authentication=auth), _topic())


def test_wrong_token_is_served_nothing(setup: Setup) -> None:
    client = _client(
        setup.broker.service_url,
        authentication=pulsar.AuthenticationToken(create_token(bytes(32), "alice")),
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(_topic())
    finally:
        client.close()


def test_token_on_rest(setup: Setup) -> None:
    url = f"{setup.broker.admin_url}/admin/v2/namespaces/sec/ns/permissions"
    assert _rest(url, headers=_bearer("root"))[0] == 200
    assert _rest(url) == (401, {"reason": "Authentication required"})
    wrong = {"Authorization": f"Bearer {create_token(bytes(32), 'root')}"}
    assert _rest(url, headers=wrong) == (401, {"reason": "Authentication required"})


# ---- basic -------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["bob", "admin"])  # DES crypt and apr1 hashes
def test_basic_on_the_wire(setup: Setup, user: str) -> None:
    _roundtrip(
        _client(
            setup.broker.service_url, authentication=pulsar.AuthenticationBasic(user, "123456")
        ),
        _topic(),
    )


def test_wrong_basic_password_is_refused(setup: Setup) -> None:
    client = _client(
        setup.broker.admin_url, authentication=pulsar.AuthenticationBasic("bob", "nope")
    )
    try:
        with pytest.raises(pulsar.ConnectError):  # the HTTP lookup gets 401
            client.create_producer(_topic())
    finally:
        client.close()


def test_basic_on_rest(setup: Setup) -> None:
    url = f"{setup.broker.admin_url}/lookup/v2/topic/persistent/sec/ns/t"
    status, body = _rest(url, headers=_basic("bob", "123456"))
    assert status == 200
    assert isinstance(body, dict)
    assert body["brokerUrlTls"] == setup.broker.service_url_tls
    assert _rest(url, headers=_basic("bob", "1234567"))[0] == 401


# ---- TLS ---------------------------------------------------------------------------------------


def test_tls_client_certificate_authenticates_on_the_wire(setup: Setup) -> None:
    certs = setup.certs
    auth = pulsar.AuthenticationTLS(str(certs.client_cert), str(certs.client_key))
    client = _client(
        setup.broker.service_url_tls,
        tls_trust_certs_file_path=str(certs.ca_cert),
        authentication=auth,
    )
    _roundtrip(client, _topic())


def test_tls_without_client_certificate_uses_another_method(setup: Setup) -> None:
    client = _client(
        setup.broker.admin_url_tls,  # https lookups, then pulsar+ssl
        tls_trust_certs_file_path=str(setup.certs.ca_cert),
        authentication=pulsar.AuthenticationToken(_token("alice")),
    )
    _roundtrip(client, _topic())


def test_untrusted_client_certificate_fails_the_handshake(setup: Setup) -> None:
    rogue = setup.rogue
    client = _client(
        setup.broker.service_url_tls,
        tls_trust_certs_file_path=str(setup.certs.ca_cert),
        authentication=pulsar.AuthenticationTLS(str(rogue.client_cert), str(rogue.client_key)),
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(_topic())
    finally:
        client.close()


def test_tls_client_certificate_on_rest(setup: Setup) -> None:
    certs = setup.certs
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    url = f"{setup.broker.admin_url_tls}/admin/v2/persistent/sec/ns"
    assert _rest(url, context=context)[0] == 200  # tls-user may list topics
    anonymous = ssl.create_default_context(cafile=str(certs.ca_cert))
    assert _rest(url, context=anonymous)[0] == 401


def test_required_client_certificate(tmp_path: Path) -> None:
    certs = write_local_certificates(tmp_path, client_role="anyone")
    with run_broker_in_thread(
        brokerServicePortTls=0,
        webServicePortTls=0,
        tlsCertificateFilePath=str(certs.broker_cert),
        tlsKeyFilePath=str(certs.broker_key),
        tlsTrustCertsFilePath=str(certs.ca_cert),
        tlsRequireTrustedClientCertOnConnect=True,
    ) as running:
        bare = _client(running.service_url_tls, tls_trust_certs_file_path=str(certs.ca_cert))
        try:
            with pytest.raises(pulsar.PulsarException):
                bare.create_producer("no-cert")
        finally:
            bare.close()
        client = _client(
            running.service_url_tls,
            tls_trust_certs_file_path=str(certs.ca_cert),
            tls_certificate_file_path=str(certs.client_cert),
            tls_private_key_file_path=str(certs.client_key),
        )
        _roundtrip(client, "with-cert")


# ---- authorization -----------------------------------------------------------------------------


def test_no_permission_is_authorization_error_on_the_wire(setup: Setup) -> None:
    client = _client(
        setup.broker.service_url, authentication=pulsar.AuthenticationToken(_token("alice"))
    )
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(_topic("closed"))
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(_topic("closed"), "sub")
    finally:
        client.close()


def test_rest_authorization_statuses(setup: Setup) -> None:
    admin = setup.broker.admin_url
    alice = _bearer("alice")
    assert _rest(f"{admin}/admin/v2/tenants", headers=alice) == (
        401,
        {
            "reason": "Unauthorized to validateBothTenantOperationAndSuperUser for"
            " originalPrincipal [null] and clientAppId [alice] about operation [LIST_TENANTS] "
        },
    )
    assert _rest(f"{admin}/admin/v2/clusters/standalone", "DELETE", headers=alice) == (
        401,
        {"reason": "This operation requires super-user access"},
    )
    assert _rest(f"{admin}/admin/v2/tenants/sec", headers=alice)[0] == 401
    assert _rest(f"{admin}/admin/v2/tenants/sec", headers=_bearer("sec-admin"))[0] == 200
    assert _rest(f"{admin}/admin/v2/namespaces/sec/ns", headers=alice)[0] == 403
    assert _rest(f"{admin}/admin/v2/namespaces/sec/ns", headers=_bearer("sec-admin"))[0] == 200
    status, _ = _rest(f"{admin}/lookup/v2/topic/persistent/sec/closed/t", headers=alice)
    assert status == 401
    assert _rest(f"{admin}/metrics")[0] == 200  # authenticateMetricsEndpoint is off


@pytest.mark.parametrize("role", ["root", "alice"])
def test_a_bad_topic_name_is_412_before_authorization(setup: Setup, role: str) -> None:
    """As Pulsar's ``validateTopicName``, which every topic method calls first."""
    admin = setup.broker.admin_url
    for path in ("persistent/sec/ns/a%2Fb/stats", "persistent/sec/ns/a%2Fb/subscriptions"):
        assert _rest(f"{admin}/admin/v2/{path}", headers=_bearer(role)) == (
            412,
            {"reason": "Topic name is not valid"},
        )
    assert _rest(f"{admin}/admin/v2/persistent/sec/ns/a%2Fb/stats")[0] == 401  # no credentials


def test_grant_and_revoke_with_the_cli(setup: Setup) -> None:
    topic = _topic("closed")
    base = [sys.executable, "-m", "emubroker", "admin", "--admin-url", setup.broker.admin_url]
    auth = ["--auth-plugin", "AuthenticationToken", "--auth-params", f"token:{_token('sec-admin')}"]

    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *auth, *args], capture_output=True, text=True, timeout=60)

    granted = admin(
        "namespaces",
        "grant-permission",
        "sec/closed",
        "--role",
        "carol",
        "--actions",
        "produce,consume",
    )
    assert granted.returncode == 0, granted.stderr
    shown = admin("namespaces", "permissions", "sec/closed")
    assert json.loads(shown.stdout) == {"carol": ["produce", "consume"]}
    _roundtrip(
        _client(
            setup.broker.service_url, authentication=pulsar.AuthenticationToken(_token("carol"))
        ),
        topic,
    )
    assert admin("namespaces", "revoke-permission", "sec/closed", "--role", "carol").returncode == 0
    client = _client(
        setup.broker.service_url, authentication=pulsar.AuthenticationToken(_token("carol"))
    )
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(topic)
    finally:
        client.close()
    refused = subprocess.run(
        [
            *base,
            "namespaces",
            "grant-permission",
            "sec/closed",
            "--role",
            "x",
            "--actions",
            "produce",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "401" in refused.stderr


def test_topic_permissions(setup: Setup) -> None:
    topic = _topic("closed")
    root = _bearer("root")
    name = topic.removeprefix("persistent://")
    url = f"{setup.broker.admin_url}/admin/v2/persistent/{name}/permissions"
    assert _rest(f"{url}/dave", "POST", ["produce"], headers=root)[0] == 404  # no such topic yet
    assert (
        _rest(f"{setup.broker.admin_url}/admin/v2/persistent/{name}", "PUT", headers=root)[0] == 204
    )
    assert _rest(f"{url}/dave", "POST", ["produce"], headers=root)[0] == 204
    assert _rest(url, headers=root) == (200, {"dave": ["produce"]})
    client = _client(
        setup.broker.service_url, authentication=pulsar.AuthenticationToken(_token("dave"))
    )
    try:
        client.create_producer(topic).send(b"x")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(topic, "sub")
    finally:
        client.close()


def test_the_dashboard_needs_a_super_user(setup: Setup) -> None:
    admin = setup.broker.admin_url
    request = urllib.request.Request(f"{admin}/dashboard/")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    # A browser is asked for credentials (basic authentication) rather than shown an error.
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"] == 'Basic realm="emubroker dashboard"'
    refused.value.close()
    for path in ("/dashboard/", "/dashboard/static/dashboard.js", "/dashboard/api/state"):
        assert _rest(f"{admin}{path}", headers=_bearer("alice")) == (
            401,
            {"reason": "This operation requires super-user access"},
        ), path
    status, state = _rest(f"{admin}/dashboard/api/state", headers=_bearer("root"))
    assert status == 200
    assert isinstance(state, dict)
    assert [broker["id"] for broker in state["brokers"]] == [state["self"]]
    assert _rest(f"{admin}/dashboard/", headers=_basic("admin", "123456"))[0] == 401
