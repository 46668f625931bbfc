"""What a failed supervisor test leaves behind, so that a flaky failure explains itself.

The supervisor tests run real processes: when one fails on a loaded machine and passes alone
afterwards, only what was recorded as it failed can say why. Two records, both shown by pytest
with the failure only:

- :func:`at_failure` (from ``running``, as the test's body raises, before the cluster stops):
  every process under the test's (pid, ppid, session, status, command line), the cluster's state
  (each child's pid, status, exit status) and every event emitted, with the time it came;
- :func:`files_of` (from ``conftest.py``'s report hook, once the test is over): the run
  directory's logs and state file, and what each stand-in recorded (its starts with pid, ppid
  and session; its stops).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from pathlib import Path

    from emubroker.cluster import ClusterEvent
    from emubroker.cluster.state import ClusterState

__all__ = ["at_failure", "files_of"]

# A log longer than this is cut to its head and tail: the evidence must stay readable.
_MAX_FILE = 20_000


def processes() -> list[str]:
    """This process and every process under it, one line each."""
    me = psutil.Process()
    lines = []
    for process in [me, *me.children(recursive=True)]:
        try:
            with process.oneshot():
                sid = os.getsid(process.pid)
                lines.append(
                    f"  pid {process.pid} ppid {process.ppid()} sid {sid} "
                    f"{process.status()}: {' '.join(process.cmdline())}"
                )
        except (psutil.Error, OSError) as exc:
            lines.append(f"  pid {process.pid}: {exc!r}")
    return lines


def at_failure(
    state: ClusterState | None, events: list[tuple[float, ClusterEvent]], began: float
) -> str:
    """The processes, the cluster's state and its events as a test's body failed."""
    lines = ["processes under the test as it failed:", *processes()]
    if state is not None:
        lines.append("the cluster's state:")
        named = [("stub", state.stub), *((f"broker {b.index}", b) for b in state.brokers)]
        for name, child in named:
            lines.append(
                f"  {name}: pid {child.pid} {child.status.value} exit {child.exit_code} "
                f"restarts {child.restarts}"
            )
    lines.append("events (seconds since the cluster began to start):")
    lines += [f"  {at - began:8.3f} {e.event} [{e.level}] {e.message}" for at, e in events]
    return "\n".join(lines)


def files_of(*directories: Path) -> str:
    """Every file in ``directories`` (not below them), named and quoted."""
    parts = []
    for directory in directories:
        if not directory.is_dir():
            parts.append(f"==> {directory}: no such directory")
            continue
        for path in sorted(p for p in directory.iterdir() if p.is_file()):
            try:
                text = path.read_bytes().decode(errors="replace")
            except OSError as exc:
                text = f"(unreadable: {exc})"
            if len(text) > _MAX_FILE:
                half = _MAX_FILE // 2
                text = (
                    f"{text[:half]}\n[... {len(text) - _MAX_FILE} characters ...]\n{text[-half:]}"
                )
            parts.append(f"==> {path}\n{text}")
    return "\n".join(parts)
