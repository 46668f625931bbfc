"""A simulation: a loadgen scenario file, its ``[simulate]`` table, checked for virtual time.

The file is loadgen's scenario TOML (docs/loadgen-trace.md) unchanged: the topics, producer and
consumer groups, phases and events, ``seed``, and ``[cluster] start = { brokers = N, config =
{...} }`` for the brokers and their configuration. ``loadgen run`` runs the same file on real
processes; ``emubroker simulate`` runs it in one process on a virtual clock, with what the
optional ``[simulate]`` table adds:

- ``epoch``: the wall-clock time (seconds since the Unix epoch) of virtual time 0, stamped on
  every trace row (default 1,700,000,000: a virtual run never reads the host's clock);
- ``[simulate.brokers.<index>] config = {...}``: configuration of one broker only (e.g. a
  different model usage per broker), over ``cluster.start.config``.

Every event of loadgen's runs in a simulation (``emubroker.simulate.control``): broker kills,
stops and restarts, unloads and splits, dispatch rates and dynamic configuration, stub faults.
A virtual clock cannot wait for anything outside this process, so what needs real sockets or
processes is refused with an error naming its key: ``cluster.service_url`` / ``admin_url``
(an external cluster), ``cluster.start.storage = "durable"``, kill and restart events with
``broker = "stub"`` (the simulation's stub is in memory with every ledger), and the
``psutil`` usage source (the host's real usage).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from emubroker.config import BrokerConfig, ConfigError, load_config
from loadgen.events import CLUSTER_START_ACTIONS, STUB
from loadgen.scenario import (
    Scenario,
    ScenarioError,
    check,
    decode_scenario,
    error_at,
    error_from_validation,
    read_scenario_text,
)

__all__ = [
    "DEFAULT_EPOCH",
    "BrokerSection",
    "SimulateSection",
    "Simulation",
    "SimulationError",
    "load_simulation",
    "parse_simulation",
]

DEFAULT_EPOCH: Final = 1_700_000_000.0
"""Wall-clock seconds at virtual time 0 unless ``[simulate] epoch`` says otherwise."""

SIMULATED_DEFAULTS: Final[dict[str, Any]] = {
    # The report's limits must not come from the host the simulation happens to run on.
    "emubrokerResourceUsageSource": "model",
    "emubrokerAvailableProcessors": 4,
    "emubrokerMaxMemoryMB": 4096,
}
"""Broker configuration a simulation starts from (the scenario's keys win)."""

SET_BY_SIMULATION: Final = (
    "brokerServicePort",
    "webServicePort",
    "emubrokerDispatchTraceDir",
    "emubrokerLoadBalancerTraceDir",
)
"""Keys the simulator sets itself (ports name the brokers; traces go to the run directory)."""


class SimulationError(ValueError):
    """The simulation cannot run as written; the message names the key and says why."""


class BrokerSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[simulate.brokers.<index>]``: one broker's own configuration."""

    config: dict[str, str | int | float | bool] = {}


class SimulateSection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[simulate]`` table (see the module docstring)."""

    epoch: float = DEFAULT_EPOCH
    brokers: dict[str, BrokerSection] = {}


@dataclass(frozen=True, kw_only=True)
class Simulation:
    """A checked simulation: the scenario, its ``[simulate]`` table and each broker's config.

    Attributes:
        scenario: The loadgen scenario.
        section: The ``[simulate]`` table.
        brokers: Each broker's configuration overrides, by index (``cluster.start.config``,
            then the broker's own), without the keys the simulator sets.
        source: The scenario file, if it came from one.
    """

    scenario: Scenario
    section: SimulateSection
    brokers: list[dict[str, Any]]
    source: str | None = None

    def broker_config(self, index: int, **set_by_simulator: Any) -> BrokerConfig:
        """Broker ``index``'s configuration, with the simulator's own keys."""
        return load_config(overrides={**self.brokers[index], **set_by_simulator}, environ={})


def load_simulation(path: str | Path) -> Simulation:
    """Read and check a simulation file.

    Raises:
        SimulationError: The file cannot be read, or the scenario is invalid or needs what a
            virtual clock cannot give.
    """
    try:
        text = read_scenario_text(path)
    except ScenarioError as exc:
        raise SimulationError(str(exc)) from None
    try:
        return parse_simulation(text, source=str(path))
    except (SimulationError, ScenarioError) as exc:
        raise SimulationError(f"{path}: {exc}") from None


def parse_simulation(text: str, *, source: str | None = None) -> Simulation:
    """Decode and check a simulation from TOML text.

    Raises:
        SimulationError: Invalid, or needs real sockets or processes (the message names the key).
    """
    try:
        scenario = decode_scenario(text)
        # Before loadgen's checks, which would accept a stub kill.
        _refuse_events(scenario, text)
        check(scenario, text)
        try:
            section = msgspec.convert(scenario.simulate, SimulateSection)
        except msgspec.ValidationError as exc:
            raise error_from_validation(text, exc, ("simulate",)) from None
        brokers = _broker_overrides(scenario, section, text)
    except ScenarioError as exc:
        raise SimulationError(str(exc)) from None
    if source is not None:
        # A usage script named by a relative path lives beside the scenario file.
        base = Path(source).parent
        for overrides in brokers:
            script = overrides.get("emubrokerResourceUsageScript")
            if isinstance(script, str) and script and not Path(script).is_absolute():
                overrides["emubrokerResourceUsageScript"] = str(base / script)
    simulation = Simulation(scenario=scenario, section=section, brokers=brokers, source=source)
    for index in range(len(brokers)):
        try:
            simulation.broker_config(index)
        except ConfigError as exc:
            raise SimulationError(f"broker {index}: {exc}") from None
    return simulation


def _refuse_events(scenario: Scenario, text: str) -> None:
    """The events a virtual clock cannot fire, named with their line."""
    for index, event in enumerate(scenario.events):
        if isinstance(event, CLUSTER_START_ACTIONS) and event.broker == STUB:
            action = event.__struct_config__.tag
            raise error_at(
                text,
                ("events", index, "broker"),
                f'event {action!r} with broker = "stub": a simulation cannot kill or restart '
                "its bookie stub (the stub of a simulation lives in memory, and every broker's "
                'ledgers with it); loadgen run can, with cluster.start storage = "stub"',
            )


def _broker_overrides(
    scenario: Scenario, section: SimulateSection, text: str
) -> list[dict[str, Any]]:
    cluster = scenario.cluster
    for key in ("service_url", "admin_url"):
        if getattr(cluster, key):
            raise error_at(
                text,
                ("cluster", key),
                f"cluster.{key} names an external cluster, which a virtual clock cannot wait "
                "for: simulate runs its own brokers in this process (use cluster.start)",
            )
    start = cluster.start
    if start is None:
        raise error_at(
            text, ("cluster",), "simulate needs cluster.start = { brokers = N, config = {...} }"
        )
    if start.storage == "durable":
        raise error_at(
            text,
            ("cluster", "start", "storage"),
            'storage = "durable" writes journals to disk; a simulation keeps the bookie stub '
            'in memory (use "memory" or "stub")',
        )
    for name in section.brokers:
        if not name.isdigit() or int(name) >= start.brokers:
            raise error_at(
                text,
                ("simulate", "brokers", name),
                f"simulate.brokers.{name}: no broker {name} (brokers are 0 to {start.brokers - 1})",
            )
    brokers = []
    for index in range(start.brokers):
        own = section.brokers.get(str(index), BrokerSection())
        overrides = {**SIMULATED_DEFAULTS, **start.config, **own.config}
        for where, config in (("cluster.start.config", start.config), ("own", own.config)):
            path: tuple[str | int, ...] = (
                ("cluster", "start", "config")
                if where == "cluster.start.config"
                else ("simulate", "brokers", str(index), "config")
            )
            for key in SET_BY_SIMULATION:
                if key in config:
                    raise error_at(
                        text, (*path, key), f"{key} is set by the simulator; leave it out"
                    )
            if config.get("emubrokerResourceUsageSource") == "psutil":
                raise error_at(
                    text,
                    (*path, "emubrokerResourceUsageSource"),
                    'emubrokerResourceUsageSource = "psutil" measures this host in real time; '
                    'a simulation needs "model" (usage from traffic, or a script)',
                )
        brokers.append(overrides)
    return brokers
