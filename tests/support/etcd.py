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

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

# Seconds etcd may take to start answering (it starts in well under one on an idle machine).
START_GUARD = 30.0


class EtcdServer(NamedTuple):
    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """Our metadata URL for it, without a chroot."""
        return f"etcd://{self.host}:{self.port}"


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


@contextlib.contextmanager
def run_etcd() -> Iterator[EtcdServer]:
    """Start a one-member etcd on loopback; stop it and remove its data on exit."""
    binary = etcd_binary()
    host, client, peer = "127.0.0.1", _free_port(), _free_port()
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        prefix="emubroker-etcd-", dir=shm if shm.is_dir() else None
    ) as data:
        log = Path(data) / "etcd.log"
        args = [
            binary,
            "--name=test",
            f"--data-dir={data}/member",
            f"--listen-client-urls=http://{host}:{client}",
            f"--advertise-client-urls=http://{host}:{client}",
            f"--listen-peer-urls=http://{host}:{peer}",
            f"--initial-advertise-peer-urls=http://{host}:{peer}",
            f"--initial-cluster=test=http://{host}:{peer}",
            "--heartbeat-interval=10",
            "--election-timeout=50",
            "--logger=zap",
            "--log-level=warn",
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_GUARD
            while not _healthy(host, client):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"etcd did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.02)  # polling a starting process, not waiting for behaviour
            yield EtcdServer(host, client, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
