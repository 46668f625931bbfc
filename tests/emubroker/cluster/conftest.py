"""A failed test with stand-in children shows what its processes wrote (``evidence.py``)."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests.emubroker.cluster import evidence


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    funcargs = getattr(item, "funcargs", {})
    if report.failed and "children_dir" in funcargs:
        children_dir: Path = funcargs["children_dir"]
        # The tests' run directory is ``tmp_path / "run"``, beside the children's.
        files = evidence.files_of(children_dir.parent / "run", children_dir)
        report.sections.append((f"cluster evidence {report.when}", files))
    return report
