"""The guide's examples (docs/testing-with-emubroker.md) run as part of the suite.

They are written as a client developer writes them, with nothing of this repository's own; here
they are marked ``integration`` (real sockets) like the other tests that use the official client.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent == HERE and item.path.name != "test_guide.py":
            item.add_marker(pytest.mark.integration)
