"""Tests for ``storage_stub.faults``: the pure, seeded fault injector."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import msgspec
import pytest

from storage_stub.faults import (
    FaultConfig,
    FaultDecision,
    FaultInjector,
    Fixed,
    LogNormal,
    Op,
    OpFaults,
    Uniform,
    load_fault_config,
)

if TYPE_CHECKING:
    from pathlib import Path


def latencies(injector: FaultInjector, op: Op, n: int, now: float = 0.0) -> list[float]:
    out = []
    for _ in range(n):
        decision = injector.decide(op, now)
        assert decision is not None
        out.append(decision.ready_at - now)
    return out


def test_nothing_configured_is_the_fast_path() -> None:
    injector = FaultInjector()
    assert all(injector.decide(op, 1.0) is None for op in Op)
    assert injector.statistics(1.0).decisions == 0


def test_fixed_latency_delays_only_its_operation() -> None:
    injector = FaultInjector(FaultConfig(ops={"add": OpFaults(latency=Fixed(ms=25))}))
    assert injector.decide(Op.ADD, 10.0) == FaultDecision(ready_at=10.025)
    assert injector.decide(Op.READ, 10.0) is None


def test_default_entry_applies_to_operations_without_their_own() -> None:
    config = FaultConfig(
        ops={"*": OpFaults(latency=Fixed(ms=5)), "read": OpFaults(latency=Fixed(ms=1))}
    )
    injector = FaultInjector(config)
    assert latencies(injector, Op.ADD, 1) == [pytest.approx(0.005)]
    assert latencies(injector, Op.READ, 1) == [pytest.approx(0.001)]


def test_uniform_latency_stays_in_bounds_and_repeats_with_the_seed() -> None:
    config = FaultConfig(seed=7, ops={"read": OpFaults(latency=Uniform(low_ms=2, high_ms=4))})
    first = latencies(FaultInjector(config), Op.READ, 200)
    assert all(0.002 <= x <= 0.004 for x in first)
    assert latencies(FaultInjector(config), Op.READ, 200) == first
    other_seed = msgspec.structs.replace(config, seed=8)
    assert latencies(FaultInjector(other_seed), Op.READ, 200) != first


def test_lognormal_latency_has_the_configured_median() -> None:
    config = FaultConfig(ops={"add": OpFaults(latency=LogNormal(median_ms=10, sigma=0.5))})
    samples = latencies(FaultInjector(config), Op.ADD, 4001)
    assert statistics.median(samples) == pytest.approx(0.010, rel=0.1)
    assert max(samples) > 0.025  # a long tail
    assert min(samples) > 0


def test_each_operation_draws_from_its_own_stream() -> None:
    config = FaultConfig(
        seed=3,
        ops={
            "add": OpFaults(latency=Uniform(low_ms=0, high_ms=10)),
            "read": OpFaults(latency=Uniform(low_ms=0, high_ms=10)),
        },
    )
    alone = latencies(FaultInjector(config), Op.ADD, 50)
    mixed = FaultInjector(config)
    interleaved = []
    for _ in range(50):
        latencies(mixed, Op.READ, 3)
        interleaved.extend(latencies(mixed, Op.ADD, 1))
    assert interleaved == alone


def test_error_rate_fails_that_fraction_deterministically() -> None:
    config = FaultConfig(seed=1, ops={"add": OpFaults(error_rate=0.3)})
    injector = FaultInjector(config)
    decisions = [injector.decide(Op.ADD, 0.0) for _ in range(2000)]
    failed = sum(1 for d in decisions if d is not None and d.error == "Unavailable")
    assert 500 < failed < 700
    again = FaultInjector(config)
    assert [again.decide(Op.ADD, 0.0) for _ in range(2000)] == decisions


def test_fail_next_n_fails_exactly_n_matching_requests_then_recovers() -> None:
    injector = FaultInjector()
    injector.fail_next(2, frozenset({Op.ADD}), code="PersistenceFailed")
    assert injector.decide(Op.READ, 0.0) is None  # not a matching kind, not counted
    assert injector.decide(Op.ADD, 0.0) == FaultDecision(0.0, "PersistenceFailed")
    assert injector.decide(Op.ADD, 0.0) == FaultDecision(0.0, "PersistenceFailed")
    assert injector.decide(Op.ADD, 0.0) is None
    assert injector.statistics(0.0).failed == 2


def test_fail_next_without_kinds_matches_everything() -> None:
    injector = FaultInjector()
    injector.fail_next(1)
    assert injector.decide(Op.META_WRITE, 0.0) == FaultDecision(0.0, "Unavailable")
    assert injector.decide(Op.ADD, 0.0) is None


def test_stall_holds_replies_until_it_ends() -> None:
    injector = FaultInjector()
    injector.stall(until=5.0)
    assert injector.decide(Op.ADD, 1.0) == FaultDecision(5.0)
    assert injector.decide(Op.READ, 4.9) == FaultDecision(5.0)
    assert injector.decide(Op.READ, 5.0) is None
    assert injector.statistics(1.0).stalled_until == 5.0


def test_latency_during_a_stall_counts_from_the_request() -> None:
    injector = FaultInjector(FaultConfig(ops={"add": OpFaults(latency=Fixed(ms=2000))}))
    injector.stall(until=1.0)
    assert injector.decide(Op.ADD, 0.0) == FaultDecision(2.0)


def test_clear_drops_everything() -> None:
    injector = FaultInjector(FaultConfig(ops={"*": OpFaults(error_rate=1.0)}))
    injector.fail_next(5)
    injector.stall(until=100.0)
    injector.clear()
    assert injector.decide(Op.ADD, 0.0) is None


def test_reconfiguring_restarts_the_random_streams() -> None:
    config = FaultConfig(seed=5, ops={"add": OpFaults(latency=Uniform(low_ms=0, high_ms=1))})
    injector = FaultInjector(config)
    first = latencies(injector, Op.ADD, 10)
    injector.configure(config)
    assert latencies(injector, Op.ADD, 10) == first


@pytest.mark.parametrize(
    ("ops", "match"),
    [({"bogus": OpFaults()}, "unknown operation"), ({"add": OpFaults(error_rate=1.5)}, "[0, 1]")],
)
def test_invalid_config_is_rejected(ops: dict[str, OpFaults], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FaultConfig(ops=ops)
    with pytest.raises(msgspec.ValidationError, match=match):
        msgspec.json.decode(msgspec.json.encode({"ops": ops}), type=FaultConfig)


def test_fail_next_rejects_a_negative_count() -> None:
    with pytest.raises(ValueError, match="count"):
        FaultInjector().fail_next(-1)


def test_config_loads_from_json_and_toml(tmp_path: Path) -> None:
    expected = FaultConfig(
        seed=9,
        ops={
            "add": OpFaults(latency=LogNormal(median_ms=3, sigma=0.4), error_rate=0.01),
            "read": OpFaults(latency=Fixed(ms=1)),
        },
    )
    json_file = tmp_path / "faults.json"
    json_file.write_bytes(msgspec.json.encode(expected))
    assert load_fault_config(json_file) == expected
    toml_file = tmp_path / "faults.toml"
    toml_file.write_text(
        "seed = 9\n"
        "[ops.add]\nerror_rate = 0.01\n"
        'latency = { type = "lognormal", median_ms = 3, sigma = 0.4 }\n'
        '[ops.read]\nlatency = { type = "fixed", ms = 1 }\n'
    )
    assert load_fault_config(toml_file) == expected
