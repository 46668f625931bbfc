"""TLS client-certificate authentication (Pulsar's ``AuthenticationProviderTls``).

The role is the certificate's common name: Pulsar reads the subject as an RFC 2253 string (the
most specific name first) and takes the first non-empty ``CN``, so with several CNs the last
one of the certificate's sequence wins; the same here. Only a certificate that the TLS
handshake verified is ever seen (``ssl`` hands out no unverified peer certificate), and a
connection without one is refused.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from emubroker.auth.errors import AuthenticationFailed
from emubroker.auth.provider import Authenticated, Credentials

__all__ = ["TlsProvider", "common_name"]


def common_name(der: bytes) -> str | None:
    """The role of a DER certificate: its most specific non-empty CN, or None."""
    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError:
        return None
    for rdn in reversed(certificate.subject.rdns):
        for attribute in rdn:
            if attribute.oid == NameOID.COMMON_NAME and attribute.value:
                return str(attribute.value)
    return None


class TlsProvider:
    """``AuthenticationProviderTls``: method ``tls``."""

    method_name = "tls"

    def authenticate(self, credentials: Credentials, *, wall_time: float) -> Authenticated:
        """The CN of the verified client certificate.

        Raises:
            AuthenticationFailed: No client certificate, or one without a CN.
        """
        if credentials.peer_certificate is None:
            raise AuthenticationFailed("Failed to get TLS certificates from client")
        role = common_name(credentials.peer_certificate)
        if role is None:
            raise AuthenticationFailed("Client unable to authenticate with TLS certificate")
        return Authenticated(role, self.method_name)
