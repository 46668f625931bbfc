"""A blocking, hand-driven Pulsar peer for the abuse and fuzz benchmarks.

Unlike ``protocol.client`` it does exactly what it is told and nothing more: it never answers a
PING, never reads unless asked, and writes whatever bytes it is given. That is what a hostile or
broken client does, and what ``bench/abuse.py`` and ``bench/fuzz.py`` need to reproduce.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlparse

from protocol import commands as c
from protocol.codec import encode_record
from protocol.framing import FrameDecoder, encode_frame, encode_send_frame

PROTOCOL_VERSION = 20


def address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a ``pulsar://host:port`` URL."""
    parsed = urlparse(url)
    assert parsed.hostname is not None
    assert parsed.port is not None
    return parsed.hostname, parsed.port


def metadata(producer: str, sequence_id: int) -> bytes:
    """A minimal valid ``MessageMetadata``."""
    return encode_record(
        c.MessageMetadata(
            producer_name=producer, sequence_id=sequence_id, publish_time=int(time.time() * 1000)
        )
    )


class RawPeer:
    """One TCP connection to a broker, driven frame by frame.

    Args:
        url: ``pulsar://host:port``.
        timeout: Socket timeout for connect and for the reads this class does itself.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(address(url), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder(max_frame_size=1 << 30)
        self._request_id = 0

    def close(self) -> None:
        self.sock.close()

    def next_request_id(self) -> int:
        self._request_id += 1
        return self._request_id

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def command(self, command: c.Command) -> None:
        self.sock.sendall(encode_frame(command))

    def read_until(self, kind: type[c.Record] | tuple[type[c.Record], ...]) -> c.Command:
        """Read frames (answering nothing) until one of ``kind`` arrives; raises on EOF."""
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                if isinstance(frame.command, kind):
                    return frame.command
                if isinstance(frame.command, c.Error):
                    raise RuntimeError(f"broker error: {frame.command}")
                continue
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("broker closed the connection")
            self._decoder.feed(data)

    def handshake(self) -> None:
        self.command(c.Connect(client_version="rawpeer", protocol_version=PROTOCOL_VERSION))
        self.read_until(c.Connected)

    def create_producer(self, topic: str, producer_id: int = 1) -> str:
        """PRODUCER; returns the producer name the broker assigned."""
        self.command(
            c.Producer(topic=topic, producer_id=producer_id, request_id=self.next_request_id())
        )
        success = self.read_until(c.ProducerSuccess)
        assert isinstance(success, c.ProducerSuccess)
        return success.producer_name

    def subscribe(
        self,
        topic: str,
        subscription: str,
        consumer_id: int = 1,
        sub_type: c.SubType = c.SubType.EXCLUSIVE,
    ) -> None:
        self.command(
            c.Subscribe(
                topic=topic,
                subscription=subscription,
                sub_type=sub_type,
                consumer_id=consumer_id,
                request_id=self.next_request_id(),
            )
        )
        self.read_until(c.Success)


def send_frame(producer_id: int, sequence_id: int, metadata_bytes: bytes, payload: bytes) -> bytes:
    """A checksummed SEND frame."""
    command = c.Send(producer_id=producer_id, sequence_id=sequence_id)
    return encode_send_frame(command, metadata_bytes, payload, True)
