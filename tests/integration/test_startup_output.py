"""What ``emubroker standalone`` prints before it is ready: the ready line, and little else.

A broker alone leads its cluster by definition, so neither its election nor the leader's start
is news at INFO; the only note allowed at INFO is the one about unmeasured bandwidth, on hosts
whose network interfaces report no speed.
"""

from __future__ import annotations

import re

import pytest

from tests.support.broker import standalone_process

pytestmark = pytest.mark.integration

_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$")


def test_standalone_prints_its_ready_line_and_at_most_the_bandwidth_note() -> None:
    with standalone_process() as proc:
        lines = list(proc.output)
    ready = [i for i, line in enumerate(lines) if " ready: " in line]
    assert ready, lines
    before = lines[: ready[0]]
    logged = [m for m in map(_LOG_LINE.match, before) if m is not None]
    assert len(logged) == len(before), before  # nothing but log lines before the ready line
    notes = [m for m in logged if "reports a speed" in m["message"]]
    assert [m["level"] for m in notes] in ([], ["INFO"]), before
    assert all("%" not in m["message"] for m in notes), before
    assert [m.string for m in logged if m not in notes] == [], before
    assert re.fullmatch(
        r"emubroker standalone ready: service pulsar://\S+ admin http://\S+\n", lines[ready[0]]
    )
