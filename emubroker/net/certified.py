"""An in-memory stream that carries a client certificate, as a verified TLS handshake would.

The broker's own client (the health check) reaches the broker over an in-memory stream, where
no handshake takes place; with ``brokerClientAuthenticationPlugin=...AuthenticationTls`` it must
still be known by its certificate. :class:`CertifiedStream` wraps the server's end and answers
``TLSAttribute.peer_certificate_binary`` with the configured certificate, which the session
reads exactly as it reads one from a TLS listener (``net.session``). Only the broker's
composition root builds one, from its own configuration: no peer can choose it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from anyio.abc import ByteStream
from anyio.streams.tls import TLSAttribute

__all__ = ["CertifiedStream"]


class CertifiedStream(ByteStream):
    """``inner`` with ``der`` as its verified peer certificate.

    Args:
        inner: The stream to wrap.
        der: The client certificate, DER-encoded.
    """

    def __init__(self, inner: ByteStream, der: bytes) -> None:
        self._inner = inner
        self._der = der

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._inner.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        await self._inner.send(item)

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {
            **self._inner.extra_attributes,
            TLSAttribute.peer_certificate_binary: lambda: self._der,
        }
