"""CRC-32C (Castagnoli), from the ``crc32c`` package's extension module alone.

``import crc32c`` runs the package's ``__init__``, which looks up the package's own version
through ``importlib.metadata`` (that package, ``zipfile``, ``csv`` and a scan of ``sys.path``'s
distributions): ~10 ms of CPU and ~1.3 MiB of memory in a starting broker, which needs the
function only (docs/performance.md, "Start-up where users wait"). So the extension module is
found where the package's ``__init__`` would import it from, and loaded under the same name: a
later ``import crc32c`` reuses it. Should the package be laid out otherwise, or be imported
already, its ``crc32c`` is used as it is.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Final, cast

__all__ = ["crc32c"]

EXTENSION: Final = "crc32c._crc32c"
"""The package's C extension, which defines ``crc32c(data, value=0) -> int``."""


def _crc32c_module() -> ModuleType:
    """The extension module, loaded without its package's ``__init__`` where it can be."""
    if "crc32c" in sys.modules:
        return sys.modules["crc32c"]
    package = importlib.util.find_spec("crc32c")  # finds, does not run, the package
    locations = package.submodule_search_locations if package is not None else None
    spec = importlib.machinery.PathFinder.find_spec(EXTENSION, locations) if locations else None
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        import crc32c

        return crc32c
    module = importlib.util.module_from_spec(spec)
    sys.modules[EXTENSION] = module
    spec.loader.exec_module(module)
    return module


crc32c: Final = cast("Callable[..., int]", _crc32c_module().crc32c)
"""``crc32c(data, value=0) -> int``: the CRC-32C of ``data``, continuing from ``value``."""
