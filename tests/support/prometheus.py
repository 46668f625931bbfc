"""Read ``/metrics`` output the way a scraper does, strictly.

``prometheus_client``'s text parser checks the structure (``# TYPE`` lines, names, label quoting
and escapes), but it reads values with Python's ``float()``, which also takes ``inf`` and ``nan``.
The exposition format names only Go float literals and ``+Inf``, ``-Inf`` and ``NaN``, so every
sample's value token is checked against that grammar as well.
"""

from __future__ import annotations

import re

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

_VALUE = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]Inf|NaN")


def parse_exposition(text: str) -> dict[str, Metric]:
    """Parse a whole Prometheus text exposition; families by name.

    Raises:
        AssertionError: A sample's value is not spelled as the format requires.
        ValueError: The text does not parse (from ``prometheus_client``).
    """
    for line in text.splitlines():
        if line and not line.startswith("#"):
            value = line.rsplit(" ", 1)[1]
            assert _VALUE.fullmatch(value), f"value {value!r} is not Prometheus text: {line!r}"
    return {family.name: family for family in text_string_to_metric_families(text)}
