"""The synchronous admin client (the CLI and the test handle: short calls, no event loop).

It talks HTTP with the standard library (``urllib``) and follows redirects to the owning
broker for every method, as ``pulsar-admin`` does.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Final

from emubroker.adminclient.errors import (
    AdminError,
    AdminHttpError,
    AdminUnreachableError,
    describe_status,
    reason_of,
)

if TYPE_CHECKING:
    import ssl

__all__ = ["MAX_REDIRECTS", "TIMEOUT", "AdminClient"]

TIMEOUT: Final = 30.0
"""Seconds an admin call may take before the client gives up (they take milliseconds)."""
MAX_REDIRECTS: Final = 5
"""Redirects (307/308 to the owning broker) a call follows before giving up."""
_REDIRECTS: Final = frozenset({307, 308})


class AdminClient:
    """Minimal synchronous client of the admin REST API.

    Args:
        base_url: ``http://host:port`` (or ``https://``) of the broker's admin API.
        headers: Sent with every request (``Authorization``).
        ssl_context: For ``https://`` URLs.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = headers or {}
        self._ssl_context = ssl_context

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> Any:
        """One request; returns the decoded JSON answer, the text answer, or None (204).

        Raises:
            AdminError: The broker answered an error, or could not be reached.
        """
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        headers, payload = self._send(method, path, data)
        if not payload:
            return None
        if "json" in headers.get("Content-Type", ""):
            return json.loads(payload)
        return payload.decode("utf-8", "replace")

    def message(self, path: str) -> tuple[dict[str, str], bytes]:
        """GET one stored message: its ``X-Pulsar-*`` headers (in order) and its payload bytes.

        Raises:
            AdminError: The broker answered an error, or could not be reached.
        """
        headers, payload = self._send("GET", path, None)
        return {k: v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}, payload

    def _send(self, method: str, path: str, data: bytes | None) -> tuple[Any, bytes]:
        url = self.base_url + path
        for _ in range(MAX_REDIRECTS + 1):
            request = urllib.request.Request(
                url,
                data=data,
                method=method,
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                    **self._headers,
                },
            )
            try:
                with urllib.request.urlopen(
                    request, timeout=TIMEOUT, context=self._ssl_context
                ) as response:
                    return response.headers, response.read()
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location")
                if exc.code in _REDIRECTS and location:
                    # Another broker owns what the call is about (a bundle, a topic): urllib
                    # follows only GET redirects, pulsar-admin follows every method.
                    url = urllib.parse.urljoin(url, location)
                    continue
                text = exc.read().decode("utf-8", "replace")
                raise AdminHttpError(
                    describe_status(exc.code, text),
                    status=exc.code,
                    reason=reason_of(text),
                    body=text,
                ) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise AdminUnreachableError(f"cannot reach {self.base_url}: {reason}") from None
        raise AdminError(f"more than {MAX_REDIRECTS} redirects from {self.base_url + path}")
