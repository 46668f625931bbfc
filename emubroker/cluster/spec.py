"""What ``emubroker cluster`` runs (``ClusterSpec``) and what it reports (``ClusterEvent``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["DEFAULT_ADMIN_PORT", "DEFAULT_PORT", "ClusterEvent", "ClusterSpec"]

DEFAULT_PORT: Final = 6650
DEFAULT_ADMIN_PORT: Final = 8080


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """What to run.

    Attributes:
        brokers: How many brokers.
        port: The first broker's binary port; broker ``i`` gets ``port + i``; 0: free ports.
        admin_port: The first broker's admin port, likewise; ``None``: 8080, or 0 with port 0.
        run_dir: Where the state file, control socket and logs go.
        data_dir: Keep the stub's ledgers and metadata durable in ``<data_dir>/stub``.
        config: A ``broker.conf`` / TOML file every broker loads.
        metadata_url: An external metadata store for the brokers instead of the stub's.
        restart: Start dead children again.
        stub_port: The stub's port; 0: a free one.
        log_level: The children's logging level.
        python: The interpreter that runs the children.
    """

    brokers: int = 3
    port: int = DEFAULT_PORT
    admin_port: int | None = None
    run_dir: Path
    data_dir: str | None = None
    config: str | None = None
    metadata_url: str | None = None
    restart: bool = False
    stub_port: int = 0
    log_level: str = "INFO"
    python: str = sys.executable

    def first_admin_port(self) -> int:
        if self.admin_port is not None:
            return self.admin_port
        return 0 if self.port == 0 else DEFAULT_ADMIN_PORT


class ClusterEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Something the supervisor reports: a broker died, was restarted, was killed on request.

    Attributes:
        event: ``broker-died``, ``broker-restarted``, ``broker-started``, ``broker-signalled``,
            ``restart-failed``, ``stub-died``, ``stub-restarted``, ``stub-started``,
            ``stub-signalled``, ``stub-data-lost``, ``stopping``, ``stopped``.
        message: The same in words.
        broker: The broker's index, for broker events.
        level: ``info``, or ``warning`` for what the user must not miss (the text output
            prefixes it with ``WARNING:``).
    """

    event: str
    message: str
    broker: int | None = None
    level: str = "info"
