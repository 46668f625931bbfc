"""CRC-32C from the ``crc32c`` package's extension, without the package's ``__init__``."""

from __future__ import annotations

import subprocess
import sys

import crc32c as package

from protocol.checksum import crc32c


def test_the_checksum_is_crc32c_and_continues_from_a_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    data = bytes(range(256)) * 5
    assert crc32c(data) == package.crc32c(data)
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)


LOADED = """
import sys
import protocol.framing, storage_stub.journal_format

print(" ".join(name for name in ("crc32c", "importlib.metadata", "zipfile") if name in sys.modules))
import crc32c

print(crc32c.crc32c is protocol.framing.checksum, crc32c.__version__ != "")
"""


def test_framing_and_the_journal_load_the_extension_alone_and_the_package_reuses_it() -> None:
    # The package's __init__ looks up its version through importlib.metadata (~10 ms, ~1.3 MiB
    # at a broker's start); a later ``import crc32c`` still works, with the same function.
    done = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["", "True True"]


ALREADY = """
import crc32c
from protocol.checksum import crc32c as function

print(function is crc32c.crc32c)
"""


def test_a_package_imported_already_is_used_as_it_is() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ALREADY], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True"]
