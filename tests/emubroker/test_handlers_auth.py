"""CONNECT authentication, credential refresh and wire permissions, over in-memory streams.

A whole broker with a FakeClock: token expiry and the refresh checks run on virtual time.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import anyio
import pytest

from emubroker.app import Broker, open_broker
from emubroker.auth.token import create_token
from emubroker.config import load_config
from emubroker.handlers.access import REFRESH_AUTH_DATA
from emubroker.policies import TenantInfo, to_json
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.support.broker import MemoryByteStream, WireClient, memory_stream_pair

pytestmark = pytest.mark.anyio

SECRET = bytes(range(32))
REFRESH = 60.0


_OPEN: list[MemoryByteStream] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def _pair() -> tuple[MemoryByteStream, MemoryByteStream]:
    client_end, server_end = memory_stream_pair()
    _OPEN.append(client_end)
    return client_end, server_end


@pytest.fixture
async def broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    config = load_config(
        overrides={
            "authenticationEnabled": True,
            "authorizationEnabled": True,
            "authenticationProviders": (
                "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
            ),
            "tokenSecretKey": base64.b64encode(SECRET).decode(),
            "superUserRoles": "root",
            "anonymousUserRole": "root",  # so that standalone's defaults are created
            "authenticationRefreshCheckSeconds": int(REFRESH),
            "keepAliveIntervalSeconds": 1_000_000,  # no PINGs in between: only auth traffic
        },
        environ={},
    )
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        await running.metadata.put("/admin/policies/acme", to_json(TenantInfo(["boss"])))
        yield running


def _now(clock: FakeClock) -> int:
    return clock.wall_ns() // 1_000_000_000


async def _connect(
    broker: Broker, token: str | None, *, method: str = "token", refresh: bool = True
) -> tuple[WireClient, c.Command]:
    client_end, server_end = _pair()
    broker.start_session(server_end)
    client = WireClient(client_end)
    await client.send(
        c.Connect(
            client_version="Pulsar-CPP-v4.2.0",
            protocol_version=20,
            auth_method_name=method,
            auth_data=None if token is None else token.encode(),
            feature_flags=c.FeatureFlags(supports_auth_refresh=refresh),
        )
    )
    return client, await client.receive_command()


async def test_valid_token_connects(broker: Broker) -> None:
    _, reply = await _connect(broker, create_token(SECRET, "alice"))
    assert isinstance(reply, c.Connected)


def _unsigned(claims: dict[str, object]) -> str:
    # A JWT with "alg": "none" and no signature: jjwt refuses it, and so must the broker.
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


@pytest.mark.parametrize(
    "token",
    [
        None,
        "garbage",
        create_token(bytes(32), "alice"),  # another key
        create_token(SECRET, "alice", expires_at=1_600_000_000),  # before the FakeClock's epoch
        _unsigned({"sub": "alice"}),
    ],
    ids=["no-token", "garbage", "wrong-key", "expired", "alg-none"],
)
async def test_bad_credentials_get_authentication_error_and_nothing_else(
    broker: Broker, token: str | None
) -> None:
    client_end, server_end = _pair()
    broker.start_session(server_end)
    client = WireClient(client_end)
    await client.send(
        c.Connect(
            client_version="t",
            protocol_version=20,
            auth_method_name="token",
            auth_data=None if token is None else token.encode(),
        )
    )
    # The client side of the core refuses anything but CONNECTED during the handshake, so read
    # the raw frame.
    data = b""
    with anyio.fail_after(5):
        while True:
            try:
                data += await client_end.receive()
            except anyio.EndOfStream:
                break
    from protocol.framing import FrameDecoder
    from protocol.wire import parse_message

    decoder = FrameDecoder(1 << 20, parse_message)
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.command == c.Error(
        request_id=(1 << 64) - 1,
        error=ServerError.AuthenticationError,
        message="Failed to authenticate",
    )
    assert decoder.next_frame() is None  # and the connection ended


async def test_expired_token_is_challenged_and_refreshed(
    broker: Broker, fake_clock: FakeClock
) -> None:
    client, reply = await _connect(
        broker, create_token(SECRET, "root", expires_at=_now(fake_clock) + 90)
    )
    assert isinstance(reply, c.Connected)
    await fake_clock.advance(REFRESH)  # still valid at the first check
    await fake_clock.advance(REFRESH)  # expired at the second
    challenge = await client.receive_command()
    assert isinstance(challenge, c.AuthChallenge)
    assert challenge.challenge == c.AuthData(auth_method_name="token", auth_data=REFRESH_AUTH_DATA)
    fresh = create_token(SECRET, "root", expires_at=_now(fake_clock) + 1000)
    await client.send(
        c.AuthResponse(
            client_version="t",
            response=c.AuthData(auth_method_name="token", auth_data=fresh.encode()),
            protocol_version=20,
        )
    )
    await fake_clock.advance(REFRESH * 3)
    # Still connected and served: a lookup is answered.
    await client.send(c.LookupTopic(topic="persistent://public/default/t", request_id=1))
    answer = await client.receive_command()
    assert isinstance(answer, c.LookupTopicResponse)
    assert answer.response is c.LookupType.CONNECT


async def test_unanswered_challenge_closes_the_connection(
    broker: Broker, fake_clock: FakeClock
) -> None:
    client, _ = await _connect(
        broker, create_token(SECRET, "alice", expires_at=_now(fake_clock) + 1)
    )
    await fake_clock.advance(REFRESH)
    assert isinstance(await client.receive_command(), c.AuthChallenge)
    await fake_clock.advance(REFRESH)
    await client.expect_closed()


async def test_refresh_with_another_role_closes_the_connection(
    broker: Broker, fake_clock: FakeClock
) -> None:
    client, _ = await _connect(
        broker, create_token(SECRET, "alice", expires_at=_now(fake_clock) + 1)
    )
    await fake_clock.advance(REFRESH)
    assert isinstance(await client.receive_command(), c.AuthChallenge)
    other = create_token(SECRET, "mallory")
    await client.send(
        c.AuthResponse(response=c.AuthData(auth_method_name="token", auth_data=other.encode()))
    )
    await client.expect_closed()


async def test_expired_credentials_without_refresh_support_close(
    broker: Broker, fake_clock: FakeClock
) -> None:
    client, _ = await _connect(
        broker, create_token(SECRET, "alice", expires_at=_now(fake_clock) + 1), refresh=False
    )
    await fake_clock.advance(REFRESH)
    await client.expect_closed()


async def test_wire_permissions(broker: Broker) -> None:
    await broker.metadata.put(
        "/admin/policies/acme/orders",
        json.dumps({"auth_policies": {"namespace_auth": {"writer": ["produce"]}}}).encode(),
    )
    await anyio.wait_all_tasks_blocked()
    topic = "persistent://acme/orders/t"
    for role, produce_ok, subscribe_ok in (
        ("writer", True, False),
        ("stranger", False, False),
        ("boss", True, True),  # tenant admin
        ("root", True, True),  # super-user
    ):
        client, _ = await _connect(broker, create_token(SECRET, role))
        await client.send(c.LookupTopic(topic=topic, request_id=1))
        lookup = await client.receive_command()
        assert isinstance(lookup, c.LookupTopicResponse)
        if produce_ok:
            assert lookup.response is c.LookupType.CONNECT
        else:
            assert (lookup.response, lookup.error, lookup.message) == (
                c.LookupType.FAILED,
                ServerError.AuthorizationError,
                "Client is not authorized to Lookup",
            )
        await client.send(c.Producer(topic=topic, producer_id=1, request_id=2))
        reply = await client.receive_command()
        if produce_ok:
            assert isinstance(reply, c.ProducerSuccess), (role, reply)
        else:
            assert reply == c.Error(
                request_id=2,
                error=ServerError.AuthorizationError,
                message="Client is not authorized to Produce",
            )
        await client.send(
            c.Subscribe(
                topic=topic,
                subscription="s",
                sub_type=c.SubType.SHARED,
                consumer_id=1,
                request_id=3,
            )
        )
        reply = await client.receive_command()
        if subscribe_ok:
            assert isinstance(reply, c.Success), (role, reply)
        else:
            assert reply == c.Error(
                request_id=3,
                error=ServerError.AuthorizationError,
                message="Client is not authorized to subscribe",
            )
        await client.send(c.GetTopicsOfNamespace(request_id=4, namespace="acme/orders"))
        reply = await client.receive_command()
        assert isinstance(reply, c.GetTopicsOfNamespaceResponse) is produce_ok, (role, reply)
