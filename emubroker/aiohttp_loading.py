"""Import aiohttp with its client's default CA certificates loaded at their first use.

``aiohttp.connector`` builds two TLS client contexts when it is imported, and
``aiohttp/__init__`` imports it even for a server: each loads the system's CA bundle (the
default verify paths: ``SSL_CERT_FILE``, else OpenSSL's ``cert.pem``): ~40 ms of CPU together,
an eighth of a broker's start, and ~2 MiB that an idle broker holds for nothing
(docs/performance.md, "Start-up where users wait"). A broker uses those contexts only for an
``https://`` call to another broker's web service (``emubroker/admin/owner_admin.py``,
``partition_fanout.py``); a standalone broker, the owner of everything, makes none.

:func:`import_aiohttp` imports aiohttp with the bundle's path pointed at nothing, so the contexts
are built without it, then has each context load the default verify paths, with the process's
real environment, at its first handshake. Built either way, a context then holds the same
settings and trusts the same certificates; only the moment the bundle is read differs. The
broker's entry points call it before anything imports aiohttp (``emubroker.__main__``,
``emubroker.zygote``); any other process imports aiohttp as it is.

The same import builds aiohttp's table of file types (``web_fileresponse.CONTENT_TYPES``, a
``mimetypes.MimeTypes()``), whose constructor first initializes the ``mimetypes`` module's own
table by reading the system's files (``/etc/mime.types``, ~3 ms). aiohttp's table holds
Python's built-in types only either way; the module's table is initialized when it is first
used (``mimetypes.guess_type`` and the other module functions do that), as in a process that
never built a ``MimeTypes``.
"""

from __future__ import annotations

import mimetypes
import os
import ssl
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

CA_FILE_VARIABLE: Final = "SSL_CERT_FILE"
"""OpenSSL's environment variable naming the CA bundle that the default verify paths load."""

DEFAULT_CONTEXTS: Final = ("_SSL_CONTEXT_VERIFIED", "_SSL_CONTEXT_UNVERIFIED")
"""aiohttp.connector's default client contexts (``ssl=True`` and ``ssl=False``)."""


class _LoadsDefaultCAOnFirstUse(ssl.SSLContext):
    """An aiohttp default context until its first handshake loads the default verify paths.

    Both ways into a handshake pass here: asyncio's TLS transport calls ``wrap_bio``, a
    blocking socket ``wrap_socket``. Having loaded them, the context becomes a plain
    ``ssl.SSLContext`` again, as aiohttp made it.
    """

    # ``ssl.SSLContext.wrap_bio(self, ...)``, not ``super()``: once loaded, ``self`` is no longer
    # an instance of this class.
    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load_default_verify_paths()
        return ssl.SSLContext.wrap_bio(self, *args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_default_verify_paths()
        return ssl.SSLContext.wrap_socket(self, *args, **kwargs)

    def _load_default_verify_paths(self) -> None:
        # What aiohttp's import did for each context (``create_default_context`` ends with it,
        # its unverified context calls it itself), now with the bundle's real path.
        self.set_default_verify_paths()
        self.__class__ = ssl.SSLContext  # type: ignore[assignment]


@contextmanager
def _no_default_ca_file() -> Iterator[None]:
    """``SSL_CERT_FILE`` names a file that does not exist, then is restored as it was."""
    before = os.environ.get(CA_FILE_VARIABLE)
    # A missing file is no error: OpenSSL's default paths skip what they cannot read.
    os.environ[CA_FILE_VARIABLE] = os.path.join(os.path.dirname(__file__), "no-ca-file")
    try:
        yield
    finally:
        if before is None:
            del os.environ[CA_FILE_VARIABLE]
        else:
            os.environ[CA_FILE_VARIABLE] = before


@contextmanager
def _mime_files_unread() -> Iterator[None]:
    """``mimetypes.MimeTypes()`` does not initialize the module's table (reading its files)."""
    if mimetypes.inited:
        yield
        return
    mimetypes.inited = True  # what MimeTypes.__init__ reads to skip mimetypes.init()
    try:
        yield
    finally:
        if getattr(mimetypes, "_db", None) is None:  # not initialized meanwhile
            mimetypes.inited = False


def import_aiohttp() -> None:
    """Import aiohttp, its default client contexts loading their CA certificates at first use.

    Does nothing when aiohttp's connector is already imported (its contexts are then complete).
    """
    if "aiohttp.connector" in sys.modules:
        return
    with _no_default_ca_file(), _mime_files_unread():
        import aiohttp.connector
        import aiohttp.web_fileresponse  # the MimeTypes (aiohttp.web imports it)
    for name in DEFAULT_CONTEXTS:
        getattr(aiohttp.connector, name).__class__ = _LoadsDefaultCAOnFirstUse
