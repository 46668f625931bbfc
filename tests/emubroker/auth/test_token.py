"""Token authentication: verification rules, key forms, and tokens as `pulsar tokens` makes them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jwt
import pytest

from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.keys import read_key
from emubroker.auth.provider import Credentials
from emubroker.auth.token import (
    TokenProvider,
    create_token,
    generate_key_pair,
    generate_secret_key,
    load_private_key,
)
from emubroker.config.security import SecurityConfig

NOW = 1_700_000_000.0
SECRET = bytes(range(32))


def _provider(**keys: object) -> TokenProvider:
    values: dict[str, object] = {
        "tokenSecretKey": "data:;base64," + base64.b64encode(SECRET).decode()
    }
    values.update(keys)
    return TokenProvider(SecurityConfig(**values))  # type: ignore[arg-type]


def _wire(token: str) -> Credentials:
    return Credentials(command_data=token.encode())


def test_hs256_token_gives_its_subject() -> None:
    result = _provider().authenticate(_wire(create_token(SECRET, "alice")), wall_time=NOW)
    assert (result.role, result.method, result.expires_at) == ("alice", "token", None)


def test_token_is_byte_identical_to_jjwt_output() -> None:
    # pulsar tokens create: header {"alg":"HS256"} (no typ), claims sub then exp.
    token = create_token(SECRET, "alice", expires_at=1_800_000_000)
    header, claims, _ = token.split(".")
    assert header == "eyJhbGciOiJIUzI1NiJ9"
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {
        "sub": "alice",
        "exp": 1800000000,
    }
    assert base64.urlsafe_b64decode(claims + "==") == b'{"sub":"alice","exp":1800000000}'


def test_expired_token_is_refused_and_clock_skew_allows_slack() -> None:
    token = create_token(SECRET, "alice", expires_at=int(NOW) - 5)
    with pytest.raises(AuthenticationFailed, match="expired"):
        _provider().authenticate(_wire(token), wall_time=NOW)
    result = _provider(tokenAllowedClockSkewSeconds=10).authenticate(_wire(token), wall_time=NOW)
    assert result.expires_at == NOW - 5


def test_token_not_yet_valid_is_refused() -> None:
    token = jwt.encode({"sub": "alice", "nbf": int(NOW) + 60}, SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed, match="not yet valid"):
        _provider().authenticate(_wire(token), wall_time=NOW)


@pytest.mark.parametrize(
    "token",
    [
        create_token(bytes(32), "alice"),  # another key
        jwt.encode({"sub": "alice"}, None, algorithm="none"),  # unsigned
        "not-a-token",
        "a.b.c",
    ],
    ids=["wrong-key", "alg-none", "garbage", "three-garbage-parts"],
)
def test_bad_tokens_are_refused(token: str) -> None:
    with pytest.raises(AuthenticationFailed):
        _provider().authenticate(_wire(token), wall_time=NOW)


def test_missing_or_blank_credentials_are_refused() -> None:
    provider = _provider()
    for credentials in (Credentials(), _wire("  "), Credentials(http_authorization="Basic x")):
        with pytest.raises(AuthenticationFailed):
            provider.authenticate(credentials, wall_time=NOW)


def test_http_bearer_header() -> None:
    token = create_token(SECRET, "bob")
    header = Credentials(http_authorization=f"Bearer {token}")
    assert _provider().authenticate(header, wall_time=NOW).role == "bob"


def test_role_claim_string_or_first_of_list() -> None:
    provider = _provider(tokenAuthClaim="roles")
    listed = jwt.encode({"sub": "x", "roles": ["ops", "dev"]}, SECRET, algorithm="HS256")
    assert provider.authenticate(_wire(listed), wall_time=NOW).role == "ops"
    missing = jwt.encode({"sub": "x"}, SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed, match="role claim"):
        provider.authenticate(_wire(missing), wall_time=NOW)


def test_audience_must_name_this_broker() -> None:
    provider = _provider(tokenAudienceClaim="aud", tokenAudience="broker-1")
    ok = jwt.encode({"sub": "a", "aud": ["x", "broker-1"]}, SECRET, algorithm="HS256")
    assert provider.authenticate(_wire(ok), wall_time=NOW).role == "a"
    other = jwt.encode({"sub": "a", "aud": "broker-2"}, SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed, match="Audiences"):
        provider.authenticate(_wire(other), wall_time=NOW)
    with pytest.raises(SecurityConfigError, match="Audience"):
        _provider(tokenAudienceClaim="aud")


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_public_key_tokens(tmp_path: Path, algorithm: str) -> None:
    private, public = generate_key_pair(algorithm)
    (tmp_path / "public.key").write_bytes(public)
    provider = TokenProvider(
        SecurityConfig(tokenPublicKey=f"file://{tmp_path}/public.key", tokenPublicAlg=algorithm)
    )
    token = create_token(load_private_key(private), "carol")
    assert jwt.get_unverified_header(token)["alg"] == algorithm
    assert provider.authenticate(_wire(token), wall_time=NOW).role == "carol"
    # An HMAC token keyed with the public key's bytes must not pass (algorithm confusion).
    forged = jwt.encode({"sub": "mallory"}, public + b"\x00" * 32, algorithm="HS256")
    with pytest.raises(AuthenticationFailed):
        provider.authenticate(_wire(forged), wall_time=NOW)


def test_weak_secret_key_stops_start_up() -> None:
    with pytest.raises(SecurityConfigError, match="not secure enough"):
        TokenProvider(SecurityConfig(tokenSecretKey=base64.b64encode(bytes(16)).decode()))
    with pytest.raises(SecurityConfigError, match="No secret key"):
        TokenProvider(SecurityConfig())


def test_key_forms(tmp_path: Path) -> None:
    key = generate_secret_key()
    assert len(key) == 32
    path = tmp_path / "secret.key"
    path.write_bytes(key)
    encoded = base64.b64encode(key).decode()
    for form in (f"file://{path}", f"file:{path}", str(path), f"data:;base64,{encoded}", encoded):
        assert read_key(form) == key
    with pytest.raises(SecurityConfigError, match="doesn't exist"):
        read_key("/no/such/file!")
