"""Throwaway certificates for local TLS: a CA, a broker certificate and a client certificate.

``emubroker standalone --tls`` and the tests use these; never anything meant to protect real
data (the keys sit unencrypted in a temporary directory). The broker certificate names
``localhost``, ``127.0.0.1`` and ``::1``, so clients that verify host names accept it.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["LocalCertificates", "write_local_certificates"]

_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class LocalCertificates:
    """Where :func:`write_local_certificates` put its PEM files."""

    ca_cert: Path
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    now: datetime.datetime,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def write_local_certificates(
    directory: Path, *, client_role: str = "admin", now: datetime.datetime | None = None
) -> LocalCertificates:
    """Write a fresh CA, a broker certificate and a client certificate (CN ``client_role``).

    Args:
        directory: Where the PEM files go (created if missing).
        client_role: The client certificate's CN: its role under TLS authentication.
        now: The validity start (tests pin it); the current time by default.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = now or datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca = _certificate("emubroker local CA", ca_key, None, ca_key, now=now, ca=True)
    paths = LocalCertificates(
        ca_cert=directory / "ca-cert.pem",
        broker_cert=directory / "broker-cert.pem",
        broker_key=directory / "broker-key.pem",
        client_cert=directory / "client-cert.pem",
        client_key=directory / "client-key.pem",
    )
    pem = serialization.Encoding.PEM
    paths.ca_cert.write_bytes(ca.public_bytes(pem))
    for subject, cert_path, key_path, server in (
        ("localhost", paths.broker_cert, paths.broker_key, True),
        (client_role, paths.client_cert, paths.client_key, False),
    ):
        key = _key()
        cert = _certificate(subject, key, ca.subject, ca_key, now=now, server=server)
        cert_path.write_bytes(cert.public_bytes(pem))
        _write_key(key, key_path)
    return paths
