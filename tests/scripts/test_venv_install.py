"""``scripts/_venv.sh``: install the project only when its install is missing or out of date.

The script runs for real, from a copy of ``scripts/`` beside a ``pyproject.toml`` the test
writes, against a stand-in venv (``EMUBROKER_VENV``) whose ``bin/python`` only records its
arguments and, for ``pip install -e``, leaves the package's metadata as pip would: no real venv
is made and nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls"
case "$*" in
  *"install --quiet -e"*)
    mkdir -p "$(dirname "$0")/../lib/python3.11/site-packages/emubroker-0.1.0.dist-info" ;;
esac
"""


def _tree(path: Path, pyproject: str = "[project]\nname = 'emubroker'\n") -> Path:
    (path / "scripts").mkdir(parents=True)
    for script in SCRIPTS.glob("_*.sh"):
        shutil.copy(script, path / "scripts" / script.name)
    (path / "pyproject.toml").write_text(pyproject)
    return path


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return venv


def _source(tree: Path, venv: Path, extras: str = "") -> list[str]:
    """Source ``_venv.sh`` as scripts/run does; returns the pip installs it ran."""
    calls = venv / "calls"
    calls.unlink(missing_ok=True)
    subprocess.run(
        ["bash", "-c", f'source "{tree}/scripts/_venv.sh" "{extras}"'],
        check=True,
        env={**os.environ, "EMUBROKER_VENV": str(venv)},
        timeout=30,
    )
    if not calls.exists():
        return []
    return [line for line in calls.read_text().splitlines() if " -e " in line]


def test_installs_once_then_not_again(tmp_path: Path, venv: Path) -> None:
    tree = _tree(tmp_path / "tree")
    assert _source(tree, venv) == [f"-m pip install --quiet -e {tree}"]
    assert _source(tree, venv) == []
    assert _source(tree, venv) == []


def test_an_install_with_more_extras_covers_fewer(tmp_path: Path, venv: Path) -> None:
    """scripts/test installs dev,spark: scripts/run (no extra, or spark) then has nothing to do."""
    tree = _tree(tmp_path / "tree")
    assert _source(tree, venv, "dev,spark") == [f"-m pip install --quiet -e {tree}[dev,spark]"]
    assert _source(tree, venv, "") == []
    assert _source(tree, venv, "spark") == []
    assert _source(tree, venv, "trio") == [f"-m pip install --quiet -e {tree}[trio]"]
    assert _source(tree, venv, "trio") == []


def test_a_changed_pyproject_installs_again(tmp_path: Path, venv: Path) -> None:
    tree = _tree(tmp_path / "tree")
    _source(tree, venv)
    (tree / "pyproject.toml").write_text("[project]\nname = 'emubroker'\nversion = '2'\n")
    assert _source(tree, venv) == [f"-m pip install --quiet -e {tree}"]
    assert _source(tree, venv) == []


def test_another_tree_sharing_the_venv_installs_itself(tmp_path: Path, venv: Path) -> None:
    """The editable install points at one tree; the same pyproject elsewhere is not installed."""
    first, second = _tree(tmp_path / "first"), _tree(tmp_path / "second")
    _source(first, venv)
    assert _source(second, venv) == [f"-m pip install --quiet -e {second}"]
    assert _source(first, venv) == [f"-m pip install --quiet -e {first}"]


def test_a_package_uninstalled_behind_the_stamp_installs_again(tmp_path: Path, venv: Path) -> None:
    tree = _tree(tmp_path / "tree")
    _source(tree, venv)
    for info in venv.glob("lib/python*/site-packages/emubroker-*.dist-info"):
        shutil.rmtree(info)
    assert _source(tree, venv) == [f"-m pip install --quiet -e {tree}"]
