"""The async admin client (aiohttp): loadgen's cluster control and the leader's owner calls.

The caller owns the session (loadgen keeps one for a run) or lets each call open its own (the
leader calls an owner now and then). A redirect is followed, or, with ``follow_redirects``
off, is an error like any other status of 300 or more (the leader's calls are authoritative:
the broker it calls must be the owner).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from emubroker.adminclient.errors import AdminHttpError, AdminUnreachableError

__all__ = ["AsyncAdminClient"]


class AsyncAdminClient:
    """One broker's admin REST API.

    Args:
        base_url: ``http://host:port`` (or ``https://``) of its admin API.
        session: The session to use; None opens one per call.
        timeout: The per-call time limits.
        headers: Sent with every request (``Authorization``).
        follow_redirects: Follow 3xx answers (else they are errors).
    """

    def __init__(
        self,
        base_url: str,
        session: aiohttp.ClientSession | None = None,
        *,
        timeout: aiohttp.ClientTimeout | None = None,
        headers: dict[str, str] | None = None,
        follow_redirects: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session
        self._timeout = timeout
        self._headers = headers or {}
        self._follow = follow_redirects

    async def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        """One call; its JSON answer (None when empty).

        Raises:
            AdminHttpError: An error status (the message: ``METHOD URL: HTTP status reason``).
            AdminUnreachableError: No answer (``aiohttp.ClientConnectorError`` as its cause
                when nothing listens there).
        """
        url = self.base_url + path
        if self._session is not None:
            return await self._call(self._session, method, url, body, params)
        try:
            async with aiohttp.ClientSession(timeout=self._timeout) as session:
                return await self._call(session, method, url, body, params)
        except aiohttp.ClientError as exc:  # the session's own failures (closing)
            raise AdminUnreachableError(f"{method} {url}: {exc}") from exc

    async def _call(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: Any,
        params: dict[str, str] | None,
    ) -> Any:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            async with session.request(
                method,
                url,
                data=None if body is None else json.dumps(body),
                headers=headers,
                params=params or None,
                timeout=self._timeout,
                allow_redirects=self._follow,
            ) as response:
                text = await response.text()
                if response.status >= (400 if self._follow else 300):
                    reason = _reason(text) or response.reason or ""
                    raise AdminHttpError(
                        f"{method} {url}: HTTP {response.status} {reason}".rstrip(),
                        status=response.status,
                        reason=reason,
                        body=text,
                    )
                return json.loads(text) if text.strip() else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise AdminUnreachableError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


def _reason(text: str) -> str:
    try:
        answer = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    return str(answer.get("reason", "")) if isinstance(answer, dict) else ""
