"""The codec's per-record plans: built at first use, and every one of them buildable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from protocol import codec
from protocol import commands as c

ALL_RECORDS = (*c.COMMAND_TYPES, *codec._RECORD_PB)


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda record: record.__name__)
def test_every_record_matches_its_proto_message(record: type[c.Record]) -> None:
    # What the import did before plans were lazy: a record field without a proto field (or a
    # record without a message) fails here, not at a broker's first use of that command.
    plan = codec._plan(record)
    assert [f.attr for f in plan.fields] == list(record.__struct_fields__)


def test_a_record_field_without_a_proto_field_is_refused() -> None:
    class Connected(c.Record, frozen=True):  # the name finds CommandConnected
        server_version: str
        no_such_field: int = 0

    with pytest.raises(TypeError, match="no_such_field has no proto field"):
        codec._plan(Connected)


PLANS_AT_IMPORT = """
import protocol.codec
print(len(protocol.codec._PLANS))
"""


def test_importing_the_codec_builds_no_plan() -> None:
    # A starting broker imports the codec and uses a few command types before it serves:
    # building all ~70 plans at import was ~6 ms of its start (docs/performance.md).
    done = subprocess.run(
        [sys.executable, "-c", PLANS_AT_IMPORT], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["0"]


def test_a_command_round_trips_through_a_plan_built_at_its_first_use() -> None:
    codec._PLANS.pop(c.Connected, None)
    record = c.Connected(server_version="emubroker", protocol_version=21)
    assert codec.decode_command(codec.encode_command(record)) == record
    assert codec._plan(c.Connected) is codec._PLANS[c.Connected]
