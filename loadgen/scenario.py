"""Scenario files: TOML, validated into frozen Structs, with errors that name the line.

A scenario says which cluster to use (or to start), the topics, the producer and consumer
groups, the phases (durations and rates, constant or ramped) and the timed events.
`loadgen/scenarios/` has examples; docs/loadgen-trace.md and the README describe the fields.

Decoding (msgspec) checks shapes and types; `check` then checks what refers to what (groups
named by phases and events exist, events fall inside the run, cluster events have a cluster
loadgen started). Every error is a `ScenarioError` whose message names the TOML line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Final, get_args

import msgspec

from loadgen.durations import dec_hook
from loadgen.events import (
    CLUSTER_START_ACTIONS,
    STUB,
    STUB_ACTIONS,
    Event,
    PauseConsumers,
    ResumeConsumers,
)
from loadgen.limits import limit_problems
from loadgen.scenario_model import (
    Batching,
    Cluster,
    ConsumerGroup,
    Keys,
    Phase,
    ProducerGroup,
    Ramp,
    Scenario,
    Start,
    Topic,
)
from loadgen.schedule import Segment

__all__ = [
    "PAYLOAD_HEADER_SIZE",
    "Batching",
    "Cluster",
    "ConsumerGroup",
    "Keys",
    "Phase",
    "ProducerGroup",
    "Ramp",
    "Scenario",
    "ScenarioError",
    "Start",
    "Topic",
    "check",
    "decode_scenario",
    "error_at",
    "error_from_validation",
    "load_scenario",
    "parse_scenario",
    "read_scenario_text",
    "segments_for",
]

PAYLOAD_HEADER_SIZE: Final = 40
"""Bytes of loadgen's header at the start of every payload (see `loadgen.payload`)."""


class ScenarioError(ValueError):
    """The scenario is invalid; the message says where and why."""


def segments_for(scenario: Scenario, group: ProducerGroup) -> list[Segment]:
    """The group's timeline (group-wide rates; the runner splits them among its producers)."""
    segments = []
    start = 0.0
    for phase in scenario.phases:
        rate = phase.rates.get(group.name, group.rate)
        if isinstance(rate, Ramp):
            segments.append(Segment(start, float(phase.duration), rate.from_, rate.to, phase.name))
        else:
            segments.append(Segment(start, float(phase.duration), rate, rate, phase.name))
        start += phase.duration
    return segments


# ---- validation ----------------------------------------------------------------------------------


def error_at(text: str | None, path: tuple[str | int, ...], message: str) -> ScenarioError:
    """A `ScenarioError` naming `path` (`$.a[0].b`) and, when `text` is given, its TOML line."""
    return _fail(text, path, message)


def error_from_validation(
    text: str | None, exc: msgspec.ValidationError, under: tuple[str | int, ...] = ()
) -> ScenarioError:
    """A `ScenarioError` for msgspec's error decoding the table at `under`, naming its line."""
    message, path = _split_msgspec_error(str(exc))
    return _fail(text, (*under, *path), message)


def _fail(text: str | None, path: tuple[str | int, ...], message: str) -> ScenarioError:
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    line = _locate(text, path) if text is not None else None
    prefix = f"line {line}: " if line is not None else ""
    return ScenarioError(f"{prefix}{message} (at {where})")


def check(scenario: Scenario, text: str | None = None) -> Scenario:
    """Check references and times; `text` (the TOML) lets errors name the line.

    Raises:
        ScenarioError: the first problem found.
    """
    if not scenario.phases:
        raise _fail(text, ("phases",), "a scenario needs at least one [[phases]] entry")
    cluster = scenario.cluster
    if cluster.start is None and not cluster.service_url:
        raise _fail(text, ("cluster",), "give cluster.service_url (and admin_url) or cluster.start")
    if cluster.start is not None and cluster.service_url:
        raise _fail(
            text, ("cluster", "service_url"), "give either cluster.start or service_url, not both"
        )
    if cluster.start is not None and cluster.start.brokers < 1:
        raise _fail(text, ("cluster", "start", "brokers"), "start.brokers must be at least 1")
    groups: set[str] = set()
    named: list[tuple[str, int, str, int]] = [
        ("producers", i, g.name, g.count) for i, g in enumerate(scenario.producers)
    ]
    named += [("consumers", i, g.name, g.count) for i, g in enumerate(scenario.consumers)]
    for kind, index, name, count in named:
        if name in groups:
            raise _fail(text, (kind, index, "name"), f"group name {name!r} is used twice")
        groups.add(name)
        if count < 1:
            raise _fail(text, (kind, index, "count"), "count must be at least 1")
    for index, producer in enumerate(scenario.producers):
        if producer.size < PAYLOAD_HEADER_SIZE:
            raise _fail(
                text,
                ("producers", index, "size"),
                f"size must be at least {PAYLOAD_HEADER_SIZE} bytes (loadgen's payload header)",
            )
        if producer.rate < 0:
            raise _fail(text, ("producers", index, "rate"), "rate must not be negative")
        if producer.keys.distribution != "none" and producer.keys.count < 1:
            raise _fail(
                text, ("producers", index, "keys", "count"), "keys.count must be at least 1"
            )
    producer_names = {p.name for p in scenario.producers}
    for index, phase in enumerate(scenario.phases):
        for name, rate in phase.rates.items():
            if name not in producer_names:
                raise _fail(
                    text, ("phases", index, "rates", name), f"no producer group named {name!r}"
                )
            low = min(rate.from_, rate.to) if isinstance(rate, Ramp) else rate
            if low < 0:
                raise _fail(text, ("phases", index, "rates", name), "rates must not be negative")
    for path, message in limit_problems(scenario):
        raise _fail(text, path, message)
    _check_events(scenario, text)
    return scenario


def _check_events(scenario: Scenario, text: str | None) -> None:
    duration = scenario.duration
    consumer_names = {c.name for c in scenario.consumers}
    start = scenario.cluster.start
    for index, event in enumerate(scenario.events):
        if event.at > duration:
            raise _fail(
                text,
                ("events", index, "at"),
                f"event at {event.at:g} s is past the end of the run ({duration:g} s)",
            )
        if (
            isinstance(event, PauseConsumers | ResumeConsumers)
            and event.group not in consumer_names
        ):
            raise _fail(
                text, ("events", index, "group"), f"no consumer group named {event.group!r}"
            )
        if isinstance(event, CLUSTER_START_ACTIONS):
            if start is None:
                raise _fail(text, ("events", index), "broker kill/restart needs cluster.start")
            if event.broker != STUB and not 0 <= event.broker < start.brokers:
                raise _fail(text, ("events", index, "broker"), f"no broker {event.broker}")
        if isinstance(event, STUB_ACTIONS) and (start is None or start.storage != "stub"):
            raise _fail(
                text,
                ("events", index),
                'stub fault events need cluster.start with storage = "stub"',
            )


def parse_scenario(text: str) -> Scenario:
    """Decode and check a scenario from TOML text.

    Raises:
        ScenarioError: bad TOML, a bad field, or a bad reference; the message names the line.
    """
    return check(decode_scenario(text), text)


def decode_scenario(text: str) -> Scenario:
    """Decode a scenario from TOML text, checking shapes and types but not `check`'s rules.

    A program that runs scenarios its own way (`emubroker simulate`) refuses what it cannot run
    before `check` asks for what only `loadgen run` needs.

    Raises:
        ScenarioError: bad TOML or a bad field; the message names the line.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"not valid TOML: {exc}") from None
    try:
        return msgspec.convert(raw, Scenario, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        message, path = _split_msgspec_error(str(exc))
        raise _fail(text, path, message) from None


def read_scenario_text(path: str | Path) -> str:
    """A scenario file's text.

    Raises:
        ScenarioError: the file cannot be read, or is not text.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: not a scenario: not UTF-8 text (byte {exc.start}); scenarios are TOML"
        ) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read, decode and check a scenario file.

    Raises:
        ScenarioError: the file cannot be read or is invalid.
    """
    text = read_scenario_text(path)
    try:
        return parse_scenario(text)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


# ---- error locations -------------------------------------------------------------------------

_PATH_IN_ERROR: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN_FIELD: Final = re.compile(r"^Object contains unknown field `(?P<key>[^`]+)`$")
_BAD_ACTION: Final = re.compile(r"^Invalid value '(?P<action>[^']*)'$")
_ACTIONS: Final = tuple(
    member.__struct_config__.tag
    for member in get_args(Event)  # the union's tags, in order
)
_PATH_PART: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_HEADER: Final = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY: Final = re.compile(r"^\s*([A-Za-z0-9_.\-\"' ]+?)\s*=")


def _split_msgspec_error(message: str) -> tuple[str, tuple[str | int, ...]]:
    match = _PATH_IN_ERROR.search(message)
    text = message if match is None else message[: match.start()]
    parts: list[str | int] = []
    if match is not None:
        for key, index in _PATH_PART.findall(match.group("path")):
            parts.append(int(index) if index else key)
    # msgspec points an unknown key at the table holding it; the key's own line says more.
    unknown = _UNKNOWN_FIELD.match(text)
    if unknown is not None:
        return f"unknown key `{unknown['key']}`", (*parts, unknown["key"])
    action = _BAD_ACTION.match(text)
    if action is not None and len(parts) == 3 and parts[0] == "events" and parts[2] == "action":
        return f"unknown action {action['action']!r}; actions: {', '.join(_ACTIONS)}", tuple(parts)
    return text, tuple(parts)


def _locate(text: str, path: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the deepest TOML table or key on `path` (None if not found).

    Follows `[table]` and `[[array]]` headers (counting array occurrences) and `key =` lines;
    good enough for scenario files, which use those forms and inline tables.
    """
    best: tuple[int, int] | None = None  # (matched depth, line)
    current: tuple[str | int, ...] = ()
    counts: dict[tuple[str | int, ...], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            keys = tuple(k.strip().strip("\"'") for k in header.group(2).split("."))
            parent = _resolve(current, keys[:-1], counts)
            table: tuple[str | int, ...] = (*parent, keys[-1])
            if header.group(1) == "[[":
                counts[table] = counts.get(table, -1) + 1
                table = (*table, counts[table])
            current = table
            candidate = current
        else:
            key = _KEY.match(line)
            if key is None:
                continue
            candidate = (*current, *(k.strip().strip("\"'") for k in key.group(1).split(".")))
        depth = _common_prefix(candidate, path)
        if depth == len(candidate) and (best is None or depth > best[0]):
            best = (depth, number)
    return best[1] if best is not None and best[0] > 0 else None


def _resolve(
    current: tuple[str | int, ...], keys: tuple[str, ...], counts: dict[tuple[str | int, ...], int]
) -> tuple[str | int, ...]:
    """A dotted header's parent: after `[[events]]`, `[events.config]` is in the last event."""
    path: tuple[str | int, ...] = ()
    for key in keys:
        path = (*path, key)
        if path in counts:
            path = (*path, counts[path])
    return path


def _common_prefix(a: tuple[str | int, ...], b: tuple[str | int, ...]) -> int:
    depth = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        depth += 1
    return depth
