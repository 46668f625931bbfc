"""A real etcd server for the etcd backend's tests.

The server is Debian's ``etcd-server`` package, which ``scripts/test`` installs. Where the binary
is missing the tests that need it are skipped with a message saying so, except under CI
(``CI`` set), where a missing etcd is a failure: CI must run them.

Each server gets free loopback ports and a data directory of its own (in ``/dev/shm`` where
there is one: etcd fsyncs every write, which tmpfs makes free) and is stopped at the end. The
election timeout is short so that etcd's smallest lease TTL is 1 s, which session-expiry tests
wait for.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# Seconds etcd may take to start answering (it starts in well under one on an idle machine).
START_GUARD = 30.0


def etcd_binary() -> str:
    """The etcd executable; skips (or, under CI, fails) the test if there is none."""
    found = shutil.which("etcd") or (
        "/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None
    )
    if found is None:
        message = "etcd is not installed (scripts/test installs Debian's etcd-server package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1) as reply:
            return b'"true"' in reply.read()
    except OSError:
        return False


class EtcdServer:
    """One etcd member on loopback ports of its own; it keeps ports and data across restarts."""

    def __init__(self, data_dir: Path) -> None:
        self.binary = etcd_binary()
        self.host, self.port, self.peer_port = "127.0.0.1", _free_port(), _free_port()
        self.data_dir = data_dir
        self.log = data_dir / "etcd.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Our metadata URL for it, without a chroot."""
        return f"etcd://{self.host}:{self.port}"

    def start(self) -> None:
        client, peer = f"http://{self.host}:{self.port}", f"http://{self.host}:{self.peer_port}"
        args = [
            self.binary,
            "--name=test",
            f"--data-dir={self.data_dir}/member",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--heartbeat-interval=10",
            "--election-timeout=50",
            "--logger=zap",
            "--log-level=warn",
        ]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_GUARD
        while not _healthy(self.host, self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"etcd did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.02)  # polling a starting process, not waiting for behaviour

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@contextlib.contextmanager
def run_etcd() -> Iterator[EtcdServer]:
    """Start a one-member etcd on loopback; stop it and remove its data on exit."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        prefix="emubroker-etcd-", dir=shm if shm.is_dir() else None
    ) as data:
        server = EtcdServer(Path(data))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def revoke_lease(server: EtcdServer, lease_id: int) -> None:
    """Revoke a lease from outside its store, as etcd does when it expires (blocking)."""
    request = urllib.request.Request(
        f"http://{server.host}:{server.port}/v3/lease/revoke",
        data=b'{"ID": "%d"}' % lease_id,
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        reply.read()


_roots = itertools.count(1)


def fresh_root(prefix: str) -> str:
    """A chroot no other test of this run uses, so tests can share one etcd."""
    return f"/{prefix}-{os.getpid()}-{next(_roots)}"


def raw_keys(server: EtcdServer, prefix: bytes) -> list[bytes]:
    """Every key in etcd that starts with ``prefix`` (blocking; for white-box checks)."""
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    body = json.dumps(
        {
            "key": base64.b64encode(prefix).decode(),
            "range_end": base64.b64encode(end).decode(),
            "keys_only": True,
        }
    ).encode()
    request = urllib.request.Request(
        f"http://{server.host}:{server.port}/v3/kv/range", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return [base64.b64decode(kv["key"]) for kv in json.load(reply).get("kvs", [])]
