"""A failed test with stand-in children shows what its processes wrote (``evidence.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emubroker.cluster import evidence


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    funcargs = getattr(item, "funcargs", {})
    if report.failed and "children_dir" in funcargs:
        tmp_path: Path = funcargs["tmp_path"]
        files = evidence.files_of(tmp_path / "run", funcargs["children_dir"])
        report.sections.append((f"cluster evidence {report.when}", files))
