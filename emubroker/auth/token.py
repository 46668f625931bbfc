"""JSON Web Token authentication (Pulsar's ``AuthenticationProviderToken``) and token minting.

Verification follows the provider: the key is ``tokenSecretKey`` (HMAC, raw bytes) or
``tokenPublicKey`` (RSA or EC, X.509 DER or PEM, of family ``tokenPublicAlg``); the token's
signature must verify with an algorithm of the key's family (never ``none``, never an HMAC with
a public key); ``exp`` and ``nbf`` are checked against the broker clock's wall time with
``tokenAllowedClockSkewSeconds`` of leeway; the role is the ``tokenAuthClaim`` claim (``sub`` by
default), or the first item when the claim is a list; with ``tokenAudienceClaim`` the audience
claim must name ``tokenAudience``. A token's ``exp`` makes the connection refresh its
credentials once it passes (AUTH_CHALLENGE, see ``emubroker.handlers.authn``).

Minting follows ``pulsar tokens`` (jjwt): header ``{"alg":...}`` only, claims ``sub`` then
``exp``, the algorithm chosen from the key (HMAC by length, RSA by size, EC by curve).
PyJWT does the signing and verifying: a maintained library, with the algorithm allow-list that
RFC 8725 asks for, rather than hand-written signature code.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from emubroker.auth.errors import AuthenticationFailed, SecurityConfigError
from emubroker.auth.keys import read_key
from emubroker.auth.provider import Authenticated, Credentials

if TYPE_CHECKING:
    from emubroker.config.security import SecurityConfig

__all__ = [
    "TokenProvider",
    "create_token",
    "generate_key_pair",
    "generate_secret_key",
    "load_private_key",
    "load_public_key",
]

BEARER: Final = "Bearer "
MIN_SECRET_BYTES: Final = 32
"""jjwt (``Keys.hmacShaKeyFor``) refuses HMAC keys under 256 bits, so Pulsar does too."""

_HMAC: Final = ("HS256", "HS384", "HS512")
_RSA: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC: Final = ("ES256", "ES384", "ES512")
_SECRET_BYTES: Final = {"HS256": 32, "HS384": 48, "HS512": 64}
_RSA_BITS: Final = {"256": 2048, "384": 3072, "512": 4096}
_EC_CURVES: Final[dict[str, ec.EllipticCurve]] = {
    "ES256": ec.SECP256R1(),
    "ES384": ec.SECP384R1(),
    "ES512": ec.SECP521R1(),
}

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _family(algorithm: str) -> tuple[str, ...]:
    for family in (_HMAC, _RSA, _EC):
        if algorithm in family:
            return family
    raise SecurityConfigError(f"unsupported signature algorithm {algorithm!r}")


def load_public_key(data: bytes, algorithm: str) -> PublicKey:
    """An RSA or EC public key (X.509 DER, as ``pulsar tokens create-key-pair`` writes, or PEM).

    Raises:
        SecurityConfigError: Not a public key of ``algorithm``'s family.
    """
    family = _family(algorithm)
    try:
        key = (
            serialization.load_pem_public_key(data)
            if data.lstrip().startswith(b"-----")
            else serialization.load_der_public_key(data)
        )
    except ValueError as exc:
        raise SecurityConfigError(f"failed to decode public key: {exc}") from None
    if family is _RSA and isinstance(key, rsa.RSAPublicKey):
        return key
    if family is _EC and isinstance(key, ec.EllipticCurvePublicKey):
        return key
    raise SecurityConfigError(f"the public key is not a key for {algorithm}")


def load_private_key(data: bytes) -> PrivateKey:
    """An RSA or EC private key (PKCS#8 DER, as ``create-key-pair`` writes, or PEM).

    Raises:
        SecurityConfigError: Not an RSA or EC private key.
    """
    try:
        key = (
            serialization.load_pem_private_key(data, password=None)
            if data.lstrip().startswith(b"-----")
            else serialization.load_der_private_key(data, password=None)
        )
    except (ValueError, TypeError) as exc:
        raise SecurityConfigError(f"failed to decode private key: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise SecurityConfigError("the private key is neither RSA nor EC")
    return key


def _signing_algorithm(key: bytes | PrivateKey) -> str:
    # jjwt's SignatureAlgorithm.forSigningKey: the strongest algorithm the key allows.
    if isinstance(key, bytes):
        if len(key) < MIN_SECRET_BYTES:
            raise SecurityConfigError(
                f"the secret key is {len(key) * 8} bits, not secure enough (256 at least)"
            )
        return "HS512" if len(key) >= 64 else "HS384" if len(key) >= 48 else "HS256"
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS512" if key.key_size >= 4096 else "RS384" if key.key_size >= 3072 else "RS256"
    curve = key.curve.name
    return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}[curve]


def create_token(
    key: bytes | PrivateKey,
    subject: str,
    *,
    expires_at: int | None = None,
    headers: dict[str, Any] | None = None,
) -> str:
    """A signed token for ``subject`` (``pulsar tokens create``).

    Args:
        key: A secret key (bytes) or an RSA/EC private key.
        subject: The ``sub`` claim: the role.
        expires_at: The ``exp`` claim, seconds since the epoch; None: never expires.
        headers: Extra JOSE header fields.

    Raises:
        SecurityConfigError: The key is too weak or of an unknown kind.
    """
    claims: dict[str, Any] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = expires_at
    header: dict[str, Any] = {"typ": None, **(headers or {})}  # jjwt writes no "typ"
    return jwt.encode(claims, key, algorithm=_signing_algorithm(key), headers=header)


def generate_secret_key(algorithm: str = "HS256") -> bytes:
    """Random bytes for an HMAC key (``pulsar tokens create-secret-key``)."""
    if algorithm not in _SECRET_BYTES:
        raise SecurityConfigError(f"{algorithm} is not an HMAC algorithm")
    return secrets.token_bytes(_SECRET_BYTES[algorithm])


def generate_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """``(private PKCS#8 DER, public X.509 DER)`` for ``algorithm`` (``create-key-pair``)."""
    private: PrivateKey
    if algorithm in _RSA:
        private = rsa.generate_private_key(65537, _RSA_BITS[algorithm[2:]])
    elif algorithm in _EC:
        private = ec.generate_private_key(_EC_CURVES[algorithm])
    else:
        raise SecurityConfigError(f"the {algorithm} algorithm does not support key pairs")
    der = serialization.Encoding.DER
    return (
        private.private_bytes(der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        private.public_key().public_bytes(der, serialization.PublicFormat.SubjectPublicKeyInfo),
    )


@dataclass(frozen=True, slots=True)
class _Verifier:
    key: bytes | PublicKey
    algorithms: tuple[str, ...]


class TokenProvider:
    """``AuthenticationProviderToken``: method ``token``.

    Args:
        config: The ``token*`` settings.

    Raises:
        SecurityConfigError: No key, an unreadable or weak key, or an audience claim without
            an audience.
    """

    method_name = "token"

    def __init__(self, config: SecurityConfig) -> None:
        if config.tokenSecretKey:
            secret = read_key(config.tokenSecretKey)
            _signing_algorithm(secret)  # refuses weak keys, as jjwt does at start-up
            self._verifier = _Verifier(secret, _HMAC)
        elif config.tokenPublicKey:
            family = _family(config.tokenPublicAlg)
            public = load_public_key(read_key(config.tokenPublicKey), config.tokenPublicAlg)
            self._verifier = _Verifier(public, family)
        else:
            raise SecurityConfigError("No secret key was provided for token authentication")
        self._role_claim = config.tokenAuthClaim or "sub"
        self._audience_claim = config.tokenAudienceClaim
        self._audience = config.tokenAudience
        self._leeway = config.tokenAllowedClockSkewSeconds
        if self._audience_claim and not self._audience:
            raise SecurityConfigError(
                f"Token Audience Claim [{self._audience_claim}] configured, "
                "but Audience stands for this broker not."
            )

    def authenticate(self, credentials: Credentials, *, wall_time: float) -> Authenticated:
        """The token's role (see the module docstring for the rules).

        Raises:
            AuthenticationFailed: No token, a bad signature, expired, or no role in it.
        """
        claims = self.verify(_token_of(credentials), wall_time=wall_time)
        role = claims.get(self._role_claim)
        if isinstance(role, list) and role and isinstance(role[0], str):
            role = role[0]
        if not isinstance(role, str) or not role:
            raise AuthenticationFailed(f"the token has no {self._role_claim!r} role claim")
        exp = claims.get("exp")
        return Authenticated(
            role, self.method_name, float(exp) if isinstance(exp, int | float) else None
        )

    def verify(self, token: str, *, wall_time: float) -> dict[str, Any]:
        """The claims of a valid token.

        Raises:
            AuthenticationFailed: Bad signature or form, expired, not yet valid, wrong audience.
        """
        verifier = self._verifier
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                verifier.key,
                algorithms=list(verifier.algorithms),
                # Time claims are checked below against the injected clock (STYLE.md §3).
                options={
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "verify_iss": False,
                },
            )
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed(f"Failed to authentication token: {exc}") from None
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int | float) and wall_time > exp + self._leeway:
            raise AuthenticationFailed("Failed to authentication token: JWT expired")
        if isinstance(nbf, int | float) and wall_time < nbf - self._leeway:
            raise AuthenticationFailed("Failed to authentication token: JWT not yet valid")
        if self._audience_claim:
            self._check_audience(claims.get(self._audience_claim))
        return claims

    def _check_audience(self, value: object) -> None:
        audiences = value if isinstance(value, list) else [value]
        if value is None or self._audience not in audiences:
            raise AuthenticationFailed(
                f"Audiences in token: {audiences} not contains this broker: {self._audience}"
            )


def _token_of(credentials: Credentials) -> str:
    # AuthenticationProviderToken.getToken: command data, else "Authorization: Bearer <token>".
    if credentials.command_data is not None:
        token = credentials.command_data.decode("utf-8", "replace")
    elif credentials.http_authorization is not None:
        header = credentials.http_authorization
        if not header.startswith(BEARER):
            raise AuthenticationFailed("Invalid HTTP Authorization header")
        token = header[len(BEARER) :]
    else:
        raise AuthenticationFailed("No token credentials passed")
    if not token.strip():
        raise AuthenticationFailed("Blank token found")
    return token.strip()
