"""Integration tests: real sockets, subprocesses and the official client."""

from __future__ import annotations
