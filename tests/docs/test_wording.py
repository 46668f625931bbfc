"""The docs name features, never the tracker's issue numbers (which a reader cannot follow)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ISSUE_NUMBER = re.compile(r"\bissues?\s*(?:#\s*)?\d+", re.IGNORECASE)


def test_no_doc_mentions_an_issue_number() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]
    assert found == []


def test_the_pattern_catches_the_usual_spellings() -> None:
    for text in ("issue 5", "(Issue 14)", "issues 3", "issue #12", "issue12"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("issues with tissue", "the issue asks", "reissue"):
        assert not ISSUE_NUMBER.search(text), text
