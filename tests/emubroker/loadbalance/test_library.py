"""``emubroker.loadbalance`` as a library: its exports, their cost, and the documented examples."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import emubroker.loadbalance as lb

DOC = Path(__file__).parents[3] / "docs" / "load-balancing-library.md"


def test_every_export_resolves_to_a_public_object() -> None:
    for name in lb.__all__:
        value = getattr(lb, name)
        assert not getattr(value, "__name__", name).startswith("_"), name
    assert set(lb.__all__) <= set(dir(lb))


def test_the_package_imports_no_module_until_a_name_is_asked_for() -> None:
    code = (
        "import sys, emubroker.loadbalance as lb\n"
        "print(sorted(m for m in sys.modules if m.startswith('emubroker.loadbalance.')))\n"
        "lb.ThresholdShedder\n"
        "print('emubroker.loadbalance.strategies.shedding' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_the_documented_examples_run() -> None:
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10
    assert result.failed == 0
