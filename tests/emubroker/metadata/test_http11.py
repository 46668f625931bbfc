"""The sans-IO HTTP/1.1 reader behind the etcd gateway client."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.metadata.http11 import (
    END,
    MAX_CHUNK_LINE,
    MAX_HEAD_BYTES,
    NEED_DATA,
    HttpProtocolError,
    ResponseHead,
    ResponseReader,
    post_request,
)

LENGTH = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'6\r\n{"x":1\r\n'  # a chunk boundary inside a JSON line, as etcd's streams have
    b"3;ext=1\r\n}\n\n\r\n"
    b"0\r\nTrailer: t\r\n\r\n"
)


def events(reader: ResponseReader) -> list[object]:
    out: list[object] = []
    while (event := reader.next_event()) is not NEED_DATA:
        out.append(event)
        if event is END:
            break
    return out


def read_all(data: bytes, cuts: list[int]) -> tuple[ResponseHead | None, bytes, bool]:
    """Feed ``data`` split at ``cuts``; return the head, the body and whether it ended."""
    reader = ResponseReader()
    head: ResponseHead | None = None
    body = b""
    ended = False
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    for piece in pieces:
        reader.feed(piece)
        for event in events(reader):
            if isinstance(event, ResponseHead):
                head = event
            elif isinstance(event, bytes):
                body += event
            elif event is END:
                ended = True
    return head, body, ended


def test_post_request_bytes() -> None:
    assert post_request("h:1", "/v3/kv/range", b"{}") == (
        b"POST /v3/kv/range HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )


def test_content_length_response() -> None:
    assert read_all(LENGTH, []) == (ResponseHead(200, keep_alive=True), b'{"a":1}', True)


def test_chunked_response_with_extensions_and_trailers() -> None:
    assert read_all(CHUNKED, []) == (ResponseHead(200, True), b'{"x":1}\n\n', True)


@given(st.data())
def test_any_split_of_the_bytes_reads_the_same(data: st.DataObject) -> None:
    for response in (LENGTH, CHUNKED):
        cuts = sorted(data.draw(st.sets(st.integers(1, len(response) - 1), max_size=12)))
        assert read_all(response, cuts) == read_all(response, [])


def test_responses_follow_each_other_on_a_kept_alive_connection() -> None:
    reader = ResponseReader()
    reader.feed(LENGTH + CHUNKED)
    assert events(reader)[-1] is END
    assert reader.done
    reader.next_response()
    assert events(reader) == [ResponseHead(200, True), b'{"x":1', b"}\n\n", END]


def test_body_until_close_and_connection_close_are_not_kept_alive() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 500 Internal\r\nConnection: close\r\n\r\npartial")
    assert events(reader) == [ResponseHead(500, keep_alive=False), b"partial"]
    reader.feed(b"")
    assert events(reader) == [END]


def test_a_new_response_needs_the_previous_one_complete() -> None:
    reader = ResponseReader()
    reader.feed(LENGTH[:-2])
    events(reader)
    with pytest.raises(HttpProtocolError, match="not complete"):
        reader.next_response()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"HTTP/2 200 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 abc OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab", "CRLF"),
    ],
)
def test_malformed_responses_raise(data: bytes, match: str) -> None:
    reader = ResponseReader()
    reader.feed(data)
    with pytest.raises(HttpProtocolError, match=match):
        events(reader)


@pytest.mark.parametrize(
    "data",
    [b"HTTP/1.1 200", LENGTH[:-3], CHUNKED[:-12], CHUNKED[:60]],
)
def test_connection_closed_inside_a_response_raises(data: bytes) -> None:
    reader = ResponseReader()
    reader.feed(data)
    events(reader)
    reader.feed(b"")
    with pytest.raises(HttpProtocolError, match="closed"):
        events(reader)


def test_the_peer_cannot_make_us_buffer_an_endless_head_or_chunk_line() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nX: " + b"y" * MAX_HEAD_BYTES)
    with pytest.raises(HttpProtocolError, match="head longer"):
        events(reader)
    reader = ResponseReader()
    reader.feed(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * (MAX_CHUNK_LINE + 1)
    )
    with pytest.raises(HttpProtocolError, match="chunk-size line longer"):
        events(reader)
