"""emubroker's test suite; the layout mirrors the packages (STYLE.md §4)."""

from __future__ import annotations
