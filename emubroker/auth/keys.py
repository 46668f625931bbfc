"""Key material as Pulsar's configuration names it: ``file:``, ``data:``, a path, or base64 text.

Pulsar's ``AuthTokenUtils.readKeyFromUrl`` (token keys) and ``AuthenticationProviderBasic``
(the users file) accept the same forms, tried in this order: a ``data:`` or ``file:`` URL, the
path of an existing file, then the value itself as base64. Anything else is refused at start-up
with the value named.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from pathlib import Path
from typing import Final

from emubroker.auth.errors import SecurityConfigError

__all__ = ["read_key"]

_BASE64: Final = re.compile(r"[A-Za-z0-9+/\s]*={0,2}\s*")


def _data_url(value: str) -> bytes:
    # RFC 2397: data:[<mediatype>][;base64],<data>
    head, sep, body = value[len("data:") :].partition(",")
    if not sep:
        raise SecurityConfigError(f"malformed data: URL {value[:40]!r}")
    if head.endswith(";base64"):
        try:
            return base64.b64decode(body, validate=False)
        except binascii.Error as exc:
            raise SecurityConfigError(f"data: URL is not valid base64: {exc}") from None
    return urllib.parse.unquote_to_bytes(body)


def read_key(value: str) -> bytes:
    """The bytes a key setting names.

    Args:
        value: ``data:...``, ``file:///path`` (or ``file:path``), a file path, or base64 text.

    Raises:
        SecurityConfigError: A malformed URL, an unreadable file, or text that is not base64.
    """
    value = value.strip()
    if value.startswith("data:"):
        return _data_url(value)
    if value.startswith("file:"):
        parsed = urllib.parse.urlparse(value)
        file = urllib.parse.unquote(parsed.path or parsed.netloc)
        try:
            return Path(file).read_bytes()
        except OSError as exc:
            raise SecurityConfigError(f"cannot read {value}: {exc.strerror}") from None
    path = Path(value)
    if path.is_file():
        return path.read_bytes()
    if value and _BASE64.fullmatch(value):
        try:
            return base64.b64decode(value)
        except binascii.Error:
            pass
    raise SecurityConfigError(f"key file {value} doesn't exist and the value is not base64")
