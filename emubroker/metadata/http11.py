"""Sans-IO HTTP/1.1, as much as a JSON client of etcd's gateway needs (RFC 9112).

The client sends ``POST`` requests with a ``Content-Length`` body (:func:`post_request`) and
reads responses with :class:`ResponseReader`: feed it bytes as they arrive, then take events
until it needs more. A response is one :class:`ResponseHead`, then body bytes, then
:data:`END`. Bodies are framed the three ways a server may frame them: ``Content-Length``,
``Transfer-Encoding: chunked`` (etcd's streams, one JSON object per line), or, with neither,
until the server closes the connection. No I/O here: the async layer (``etcd_gateway``) owns
the socket.

Why not h11: it is the general tool, but measured against etcd (``bench/etcd_clients.py``) its
per-request cost made the client slower than aiohttp's C parser; this reader does only what the
gateway's replies need and costs a few string operations per response.

Everything the peer controls is bounded: the head (:data:`MAX_HEAD_BYTES`) and a chunk-size
line (:data:`MAX_CHUNK_LINE`); a violation raises :class:`HttpProtocolError` and the
connection must be dropped.
"""

from __future__ import annotations

import enum
from typing import Final, NamedTuple

__all__ = [
    "END",
    "MAX_CHUNK_LINE",
    "MAX_HEAD_BYTES",
    "NEED_DATA",
    "HttpProtocolError",
    "ResponseHead",
    "ResponseReader",
    "post_request",
]

# A response's status line and headers; etcd's are a few hundred bytes.
MAX_HEAD_BYTES: Final = 64 * 1024
# "<hex size>[;extensions]\r\n": RFC 9112 §7.1; 1 KiB is generous for a size and extensions.
MAX_CHUNK_LINE: Final = 1024


class HttpProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response we can read; drop the connection."""


class ResponseHead(NamedTuple):
    """Status line and headers of a response.

    Attributes:
        status: The status code.
        keep_alive: Whether the connection may carry another request after this response.
    """

    status: int
    keep_alive: bool


class _Marker(enum.Enum):
    NEED_DATA = "need data"
    END = "end"


NEED_DATA: Final = _Marker.NEED_DATA
"""``next_event`` has nothing until more bytes are fed."""
END: Final = _Marker.END
"""The response is complete."""


def post_request(host: str, path: str, body: bytes) -> bytes:
    """The bytes of ``POST path`` with a JSON ``body``."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("ascii") + body


class _State(enum.Enum):
    HEAD = "head"
    LENGTH = "length"  # a Content-Length body: `remaining` bytes to go
    CHUNK_SIZE = "chunk size"
    CHUNK_DATA = "chunk data"  # `remaining` bytes of the chunk, then its CRLF
    TRAILERS = "trailers"  # after the last chunk: trailer lines until an empty one
    UNTIL_CLOSE = "until close"
    DONE = "done"


class ResponseReader:
    """Reads one response after another from a connection's bytes."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state = _State.HEAD
        self._remaining = 0
        self._closed = False

    @property
    def done(self) -> bool:
        """Whether the current response is complete (and no bytes of another were fed)."""
        return self._state is _State.DONE

    def feed(self, data: bytes) -> None:
        """Add bytes from the connection; ``b""`` means the server closed it."""
        if data:
            self._buffer += data
        else:
            self._closed = True

    def next_response(self) -> None:
        """Start reading the next response on a kept-alive connection."""
        if self._state is not _State.DONE:
            raise HttpProtocolError("the previous response is not complete")
        self._state = _State.HEAD

    def next_event(self) -> ResponseHead | bytes | _Marker:
        """The next event: the head, body bytes, ``END``, or ``NEED_DATA``.

        Raises:
            HttpProtocolError: The bytes are not a valid response, or the server closed the
                connection in the middle of one.
        """
        match self._state:
            case _State.HEAD:
                return self._head()
            case _State.LENGTH | _State.CHUNK_DATA | _State.UNTIL_CLOSE:
                return self._body()
            case _State.CHUNK_SIZE:
                return self._chunk_size()
            case _State.TRAILERS:
                return self._trailers()
            case _State.DONE:
                return END

    # ---- states ----------------------------------------------------------------------------

    def _line(self, limit: int, what: str) -> bytes | None:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > limit:
                raise HttpProtocolError(f"{what} longer than {limit} bytes")
            self._check_not_closed(what)
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _check_not_closed(self, what: str) -> None:
        if self._closed:
            raise HttpProtocolError(f"connection closed in the middle of the {what}")

    def _head(self) -> ResponseHead | _Marker:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpProtocolError(f"response head longer than {MAX_HEAD_BYTES} bytes")
            self._check_not_closed("response head")
            return NEED_DATA
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[: end + 4]
        version, _, rest = lines[0].partition(" ")
        status = rest[:3]
        if version not in ("HTTP/1.1", "HTTP/1.0") or not status.isdigit():
            raise HttpProtocolError(f"bad status line {lines[0]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise HttpProtocolError(f"bad header line {line!r}")
            headers[name.lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep_alive = version == "HTTP/1.1" and connection != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _State.CHUNK_SIZE
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                raise HttpProtocolError(f"bad Content-Length {length!r}")
            self._remaining = int(length)
            self._state = _State.LENGTH
        elif int(status) in (204, 304) or 100 <= int(status) < 200:
            self._remaining = 0
            self._state = _State.LENGTH
        else:
            self._state = _State.UNTIL_CLOSE
            keep_alive = False
        return ResponseHead(int(status), keep_alive)

    def _body(self) -> bytes | _Marker:
        if self._state is _State.UNTIL_CLOSE:
            if self._buffer:
                data = bytes(self._buffer)
                self._buffer.clear()
                return data
            if self._closed:
                self._state = _State.DONE
                return END
            return NEED_DATA
        if self._remaining == 0:
            if self._state is _State.LENGTH:
                self._state = _State.DONE
                return END
            if not b"\r\n".startswith(self._buffer[:2]):  # the CRLF after a chunk's data
                raise HttpProtocolError("chunk data not followed by CRLF")
            if len(self._buffer) < 2:
                self._check_not_closed("chunked body")
                return NEED_DATA
            del self._buffer[:2]
            self._state = _State.CHUNK_SIZE
            return self._chunk_size()
        if not self._buffer:
            self._check_not_closed("body")
            return NEED_DATA
        data = bytes(self._buffer[: self._remaining])
        del self._buffer[: len(data)]
        self._remaining -= len(data)
        return data

    def _chunk_size(self) -> bytes | _Marker:
        line = self._line(MAX_CHUNK_LINE, "chunk-size line")
        if line is None:
            return NEED_DATA
        size = line.partition(b";")[0].strip()
        try:
            self._remaining = int(size, 16)
        except ValueError:
            raise HttpProtocolError(f"bad chunk size {size!r}") from None
        if self._remaining < 0 or size.startswith((b"-", b"+", b"0x", b"0X")):
            raise HttpProtocolError(f"bad chunk size {size!r}")
        if self._remaining == 0:
            self._state = _State.TRAILERS
            return self._trailers()
        self._state = _State.CHUNK_DATA
        return self._body()

    def _trailers(self) -> _Marker:
        while True:
            line = self._line(MAX_HEAD_BYTES, "trailer")
            if line is None:
                return NEED_DATA
            if not line:
                self._state = _State.DONE
                return END
