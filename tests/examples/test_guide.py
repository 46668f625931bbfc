"""The guide's examples are the files in this directory, character for character."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "testing-with-emubroker.md"
EXAMPLE = re.compile(r"<!-- example: (?P<path>\S+) -->\n```python\n(?P<code>.*?)```\n", re.DOTALL)


def test_every_example_in_the_guide_is_a_test_file_of_the_suite() -> None:
    found = {m["path"]: m["code"] for m in EXAMPLE.finditer(GUIDE.read_text())}
    expected = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests" / "examples").glob("test_*.py")
        if path.name != "test_guide.py"
    )
    assert sorted(found) == expected
    for path, code in found.items():
        assert code == (ROOT / path).read_text(), f"the guide's copy of {path} differs"


def test_the_readme_links_the_guide() -> None:
    assert "docs/testing-with-emubroker.md" in (ROOT / "README.md").read_text()
