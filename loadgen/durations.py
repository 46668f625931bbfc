"""Durations as people write them in scenarios: `90`, `2.5`, `"500ms"`, `"10s"`, `"2m"`, `"1h"`."""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["Seconds", "dec_hook", "enc_hook", "parse_duration"]

_PATTERN: Final = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class Seconds(float):
    """A duration in seconds (a float), decoded from a number or a string with a unit."""


def parse_duration(value: object) -> Seconds:
    """`value` (seconds as a number, or a string with `ms`, `s`, `m` or `h`) in seconds.

    Raises:
        ValueError: not a non-negative duration.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value}")
        return Seconds(value)
    if isinstance(value, str) and (match := _PATTERN.match(value)):
        return Seconds(float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    raise ValueError(f"expected a duration such as 30, '500ms', '10s' or '2m', got {value!r}")


def enc_hook(value: Any) -> Any:
    """Msgspec's encode hook: `Seconds` as a plain float."""
    if isinstance(value, Seconds):
        return float(value)
    raise NotImplementedError(f"cannot encode {type(value)!r}")


def dec_hook(type_: type, value: Any) -> Any:
    """Msgspec's decode hook for `Seconds` fields."""
    if type_ is Seconds:
        return parse_duration(value)
    raise NotImplementedError(f"cannot decode {type_!r}")
