"""The broker's TLS context, from Pulsar's ``tls*`` keys (both the binary and the HTTPS port).

* the certificate chain and key: ``tlsCertificateFilePath``, ``tlsKeyFilePath`` (required);
* client certificates: verified against ``tlsTrustCertsFilePath`` (or the system's CAs).
  ``tlsRequireTrustedClientCertOnConnect`` makes one mandatory; otherwise one is asked for and
  verified when the client offers it (Netty's ``ClientAuth.OPTIONAL``): an untrusted one fails
  the handshake, none at all is fine and the client authenticates another way.
* ``tlsAllowInsecureConnection``: Pulsar then accepts any client certificate unverified.
  Python's ``ssl`` cannot ask for a certificate without verifying it, so the emulator asks for
  none: TLS still encrypts, but ``AuthenticationProviderTls`` cannot authenticate anybody
  (docs/security.md lists this difference).
* ``tlsProtocols`` (``TLSv1.2``, ``TLSv1.3``) and ``tlsCiphers`` narrow what is offered.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Final

from emubroker.auth.errors import SecurityConfigError

if TYPE_CHECKING:
    from emubroker.config.security import SecurityConfig

__all__ = ["server_ssl_context"]

_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(config: SecurityConfig) -> ssl.SSLContext:
    """A server-side context for the TLS listeners.

    Raises:
        SecurityConfigError: A file is missing or unreadable, or a protocol name is unknown.
    """
    if not config.tlsCertificateFilePath or not config.tlsKeyFilePath:
        raise SecurityConfigError(
            "a TLS port is configured: tlsCertificateFilePath and tlsKeyFilePath are required"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(config.tlsCertificateFilePath, config.tlsKeyFilePath)
    except (OSError, ssl.SSLError) as exc:
        raise SecurityConfigError(
            f"cannot load tlsCertificateFilePath/tlsKeyFilePath "
            f"({config.tlsCertificateFilePath}, {config.tlsKeyFilePath}): {exc}"
        ) from None
    if config.tlsAllowInsecureConnection:
        context.verify_mode = ssl.CERT_NONE
    else:
        try:
            if config.tlsTrustCertsFilePath:
                context.load_verify_locations(config.tlsTrustCertsFilePath)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        except (OSError, ssl.SSLError) as exc:
            raise SecurityConfigError(
                f"cannot load tlsTrustCertsFilePath ({config.tlsTrustCertsFilePath}): {exc}"
            ) from None
        context.verify_mode = (
            ssl.CERT_REQUIRED if config.tlsRequireTrustedClientCertOnConnect else ssl.CERT_OPTIONAL
        )
    versions = []
    for name in config.csv(config.tlsProtocols):
        if name not in _VERSIONS:
            raise SecurityConfigError(f"tlsProtocols: {name!r} is not one of {sorted(_VERSIONS)}")
        versions.append(_VERSIONS[name])
    if versions:
        context.minimum_version, context.maximum_version = min(versions), max(versions)
    else:
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # Pulsar's default: TLSv1.3, TLSv1.2
    if config.tlsCiphers:
        try:
            context.set_ciphers(":".join(config.csv(config.tlsCiphers)))
        except ssl.SSLError as exc:
            raise SecurityConfigError(f"tlsCiphers: {exc}") from None
    return context
