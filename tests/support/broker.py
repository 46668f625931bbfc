"""Helpers for broker tests: in-memory byte streams, a raw wire client, broker launchers.

* ``memory_stream_pair`` gives two connected ``anyio.abc.ByteStream`` ends (unbounded buffers, so
  a send never blocks) for component tests of sessions and handlers without sockets.
* ``WireClient`` speaks the protocol frame by frame over any byte stream with the sans-IO
  ``Connection(Role.CLIENT)``; tests assert on exactly what the broker sends.
* ``standalone_process`` runs ``python -m emubroker standalone`` and parses the ``ready`` line
  (in-process brokers for the official client come from ``emubroker.testing``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from protocol import commands as c
from protocol.connection import CLOSED, Connection, Role
from protocol.errors import RemoteProtocolError
from protocol.framing import Frame, build_entry, checksum

ROOT = Path(__file__).resolve().parents[2]

# ---- in-memory byte streams ---------------------------------------------------------------


class MemoryByteStream(ByteStream):
    """One end of an in-memory, unbounded, ordered byte pipe pair."""

    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send = send
        self._receive = receive
        self._pending = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._pending:
            self._pending = await self._receive.receive()  # EndOfStream once the peer closed
        data, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return data

    async def send(self, item: bytes) -> None:
        await self._send.send(bytes(item))

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_stream_pair() -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected stream ends: what one sends, the other receives."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](math.inf)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](math.inf)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)


# ---- a raw protocol client ----------------------------------------------------------------


class WireClient:
    """The client side of one connection, frame by frame."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.conn = Connection(Role.CLIENT, max_frame_size=64 * 1024 * 1024)
        self._ids = iter(range(1, 1 << 62))

    def request_id(self) -> int:
        return next(self._ids)

    async def send(self, command: c.Command) -> None:
        await self.stream.send(self.conn.send(command))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send(data)

    async def send_message(
        self,
        producer_id: int,
        sequence_id: int,
        payload: bytes = b"x",
        *,
        metadata: c.MessageMetadata | None = None,
        bad_checksum: bool = False,
    ) -> None:
        from protocol.codec import encode_record

        meta = metadata or c.MessageMetadata(
            producer_name="p", sequence_id=sequence_id, publish_time=1_700_000_000_000
        )
        entry = build_entry(encode_record(meta), payload)
        crc = checksum(entry) ^ (1 if bad_checksum else 0)
        await self.stream.send(
            self.conn.send_payload(
                c.Send(producer_id=producer_id, sequence_id=sequence_id), entry, crc
            )
        )

    async def receive(self) -> Frame:
        """The next frame from the broker.

        Raises:
            EOFError: the broker closed the connection.
        """
        while True:
            frame = self.conn.next_frame()
            if frame is CLOSED:
                raise EOFError("broker closed the connection")
            if frame is not None:
                assert isinstance(frame, Frame)
                return frame
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            self.conn.receive_data(data)

    async def receive_command(self) -> c.Command:
        return (await self.receive()).command

    async def expect_closed(self) -> None:
        """Read until the broker hangs up; fail on anything but PING/PONG meanwhile."""
        while True:
            try:
                frame = await self.receive()
            except (EOFError, RemoteProtocolError):
                return
            assert isinstance(frame.command, (c.Ping, c.Pong)), frame

    async def handshake(self, protocol_version: int = 20) -> c.Connected:
        await self.send(
            c.Connect(client_version="Pulsar-CPP-v4.2.0", protocol_version=protocol_version)
        )
        reply = await self.receive_command()
        assert isinstance(reply, c.Connected), reply
        return reply


# ---- brokers for integration tests --------------------------------------------------------


_READY = re.compile(r"ready.*?(pulsar://\S+).*?(http://\S+)")


class StandaloneProcess:
    """A running ``emubroker standalone`` subprocess.

    Its output is drained by a thread into ``output``: an unread pipe would fill up and block
    the broker's logging.
    """

    def __init__(
        self, proc: subprocess.Popen[str], service_url: str, admin_url: str, lines: list[str]
    ) -> None:
        self.proc = proc
        self.service_url = service_url
        self.admin_url = admin_url
        self.output = lines
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> int:
        """Send ``sig`` and wait for the exit code (and the rest of the output)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self._drain.join(timeout)
        return code


@contextlib.contextmanager
def standalone_process(
    *args: str, timeout: float = 30.0, open_files: int | None = None
) -> Iterator[StandaloneProcess]:
    """``python -m emubroker standalone --port 0 --admin-port 0 *args`` as a subprocess.

    Args:
        args: More command-line arguments.
        timeout: Seconds to wait for the ready line.
        open_files: If given, the process's limit of open files (soft and hard).

    Yields:
        The process, once its ready line was printed; stopped with SIGINT on exit.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emubroker",
            "standalone",
            "--port",
            "0",
            "--admin-port",
            "0",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        preexec_fn=None if open_files is None else partial(_limit_open_files, open_files),
    )
    running: StandaloneProcess | None = None
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            match = _READY.search(line)
            if match:
                running = StandaloneProcess(proc, match[1], match[2], lines)
                yield running
                break
        else:
            raise AssertionError(f"no ready line within {timeout}s: {lines}")
        if not any(_READY.search(line) for line in lines):
            raise AssertionError(f"broker exited before ready: {''.join(lines)}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if running is not None:
            running.stop()  # joins the drain thread before the pipe is closed
        if proc.stdout is not None:
            proc.stdout.close()


def _limit_open_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
