"""Calls to a broker's admin REST API for tests: status and JSON body, errors included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def rest_call(admin_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """``method path`` with ``body`` as JSON; the status and the decoded body (None if empty).

    An error status is returned like any other, with its body decoded when it is JSON.
    """
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        admin_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), _decoded(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), _decoded(exc.read())


def _decoded(text: bytes) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
