"""Latency and faults on demand: a pure, seeded, deterministic injector (issue 4, part 3).

The stub consults a :class:`FaultInjector` once per request, before applying it, and gets back
when the reply may leave and whether the request must fail instead. Everything here is pure: the
injector takes ``now`` and returns decisions, and the server does the waiting on its ``Clock``
(STYLE.md §3, layer 1), so tests drive latency with a ``FakeClock`` and get the same numbers on
every run.

Determinism: each operation kind draws from its own ``random.Random`` seeded from
``(seed, op)``, so the latencies one kind sees depend only on the seed and how many requests of
that kind came before, not on how other kinds interleave with it.

Configuration is a frozen :class:`FaultConfig` (from a JSON/TOML file at start-up, or sent at
runtime in a control request); "fail the next N" and "stall for a duration" are imperative
control calls on top of it.
"""

from __future__ import annotations

import enum
import math
import random
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "DEFAULT_ERROR_CODE",
    "FaultConfig",
    "FaultDecision",
    "FaultInjector",
    "FaultStatistics",
    "Fixed",
    "LatencyModel",
    "LogNormal",
    "Op",
    "OpFaults",
    "Uniform",
    "load_fault_config",
]

# The code injected errors carry: a transient "bookie unavailable" (StubUnavailableError), which
# is what a broker sees from BookKeeper when an ensemble cannot be formed.
DEFAULT_ERROR_CODE: Final = "Unavailable"

# Key of FaultConfig.ops that applies to every operation without an entry of its own.
ANY_OP: Final = "*"


class Op(enum.StrEnum):
    """Operation kinds that faults are configured for; control requests are never faulted."""

    CREATE = "create"
    ADD = "add"
    READ = "read"
    LAC = "lac"
    CLOSE = "close"
    FENCE = "fence"
    DELETE = "delete"
    INFO = "info"
    META_READ = "meta_read"
    META_WRITE = "meta_write"
    SESSION = "session"


class Fixed(msgspec.Struct, frozen=True, tag="fixed", forbid_unknown_fields=True):
    """Always the same latency.

    Attributes:
        ms: Milliseconds added to every reply.
    """

    ms: float

    def sample(self, rng: random.Random) -> float:
        return self.ms


class Uniform(msgspec.Struct, frozen=True, tag="uniform", forbid_unknown_fields=True):
    """Latency drawn uniformly from ``[low_ms, high_ms]``."""

    low_ms: float
    high_ms: float

    def sample(self, rng: random.Random) -> float:
        return rng.uniform(self.low_ms, self.high_ms)


class LogNormal(msgspec.Struct, frozen=True, tag="lognormal", forbid_unknown_fields=True):
    """Log-normal latency, the usual shape of storage latency: a median and a long tail.

    Attributes:
        median_ms: The median (``exp(mu)``).
        sigma: Standard deviation of the underlying normal; ~0.5 gives p99 about 3x the median.
    """

    median_ms: float
    sigma: float

    def sample(self, rng: random.Random) -> float:
        return rng.lognormvariate(math.log(self.median_ms), self.sigma)


LatencyModel = Fixed | Uniform | LogNormal


class OpFaults(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Faults for one operation kind.

    Attributes:
        latency: Extra latency before the reply, or ``None`` for none.
        error_rate: Probability in ``[0, 1]`` that a request fails with ``Unavailable`` (and is
            not applied).
    """

    latency: LatencyModel | None = None
    error_rate: float = 0.0


class FaultConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The declarative part of the fault set-up.

    Attributes:
        seed: Seeds every random draw.
        ops: Faults per :class:`Op` value; the key ``"*"`` applies to kinds without their own.
    """

    seed: int = 0
    ops: dict[str, OpFaults] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, faults in self.ops.items():
            if key != ANY_OP and key not in Op.__members__.values():
                raise ValueError(f"unknown operation {key!r} in fault config")
            if not 0.0 <= faults.error_rate <= 1.0:
                raise ValueError(f"error_rate of {key!r} must be in [0, 1]")


class FaultDecision(msgspec.Struct, frozen=True):
    """What to do with one request.

    Attributes:
        ready_at: Clock time before which the reply must not leave.
        error: Error code to fail the request with (not applying it), or ``None``.
    """

    ready_at: float
    error: str | None = None


class FaultStatistics(msgspec.Struct, frozen=True):
    """Counters, for tests and the load generator's reports."""

    decisions: int
    delayed: int
    failed: int
    fail_next_left: int
    stalled_until: float


class FaultInjector:
    """Decides latency and failures per request; pure (methods take ``now``).

    Args:
        config: The initial configuration; the default injects nothing.
    """

    def __init__(self, config: FaultConfig | None = None) -> None:
        self._fail_next = 0
        self._fail_ops: frozenset[Op] | None = None
        self._fail_code = DEFAULT_ERROR_CODE
        self._stall_until = -math.inf
        self._decisions = self._delayed = self._failed = 0
        self.configure(config or FaultConfig())

    def configure(self, config: FaultConfig) -> None:
        """Replace the configuration; restarts every random stream from the seed."""
        self._config = config
        self._per_op: dict[Op, tuple[OpFaults, random.Random]] = {}
        default = config.ops.get(ANY_OP)
        for op in Op:
            faults = config.ops.get(op.value, default)
            if faults is not None and (faults.latency is not None or faults.error_rate > 0):
                self._per_op[op] = (faults, random.Random(f"{config.seed}:{op.value}"))

    @property
    def active(self) -> bool:
        """Whether anything could be injected; when false, ``decide`` always returns ``None``."""
        return bool(self._per_op) or self._fail_next > 0 or self._stall_until > -math.inf

    @property
    def config(self) -> FaultConfig:
        """The current declarative configuration."""
        return self._config

    def fail_next(
        self, count: int, ops: frozenset[Op] | None = None, code: str = DEFAULT_ERROR_CODE
    ) -> None:
        """Make the next ``count`` matching requests fail with ``code``.

        Args:
            count: How many; ``0`` cancels a previous call.
            ops: Only these kinds count (and fail); ``None`` means every kind.
            code: The error code to reply with.
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        self._fail_next, self._fail_ops, self._fail_code = count, ops, code

    def stall(self, until: float) -> None:
        """Hold every reply until clock time ``until`` (the stub looks hung)."""
        self._stall_until = until

    def clear(self) -> None:
        """Drop every fault: configuration, pending failures and stalls."""
        self.fail_next(0)
        self._stall_until = -math.inf
        self.configure(FaultConfig(seed=self._config.seed))

    def decide(self, op: Op, now: float) -> FaultDecision | None:
        """Decide the fate of one request of kind ``op`` arriving at ``now``.

        Returns:
            ``None`` when nothing is injected (the fast path: reply at once), else the decision.
        """
        per_op = self._per_op.get(op)
        if per_op is None and not self._fail_next and self._stall_until <= now:
            return None
        self._decisions += 1
        ready_at = max(now, self._stall_until)
        error: str | None = None
        if self._fail_next and (self._fail_ops is None or op in self._fail_ops):
            self._fail_next -= 1
            error = self._fail_code
        if per_op is not None:
            faults, rng = per_op
            # Draw latency before the error coin, always in the same order, so the stream of
            # latencies does not depend on which requests failed.
            if faults.latency is not None:
                ready_at = max(ready_at, now + faults.latency.sample(rng) / 1000.0)
            if faults.error_rate > 0 and rng.random() < faults.error_rate and error is None:
                error = DEFAULT_ERROR_CODE
        if error is None and ready_at <= now:
            return None  # nothing applied to this one (e.g. another kind was to fail)
        if ready_at > now:
            self._delayed += 1
        if error is not None:
            self._failed += 1
        return FaultDecision(ready_at, error)

    def statistics(self, now: float) -> FaultStatistics:
        """Return a frozen snapshot of the counters."""
        return FaultStatistics(
            decisions=self._decisions,
            delayed=self._delayed,
            failed=self._failed,
            fail_next_left=self._fail_next,
            stalled_until=max(self._stall_until, now),
        )


def load_fault_config(path: str | Path) -> FaultConfig:
    """Read a :class:`FaultConfig` from a ``.json`` or ``.toml`` file.

    Raises:
        OSError: The file cannot be read.
        msgspec.ValidationError: The content does not describe a valid configuration.
    """
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".toml":
        import tomllib  # here: a broker imports this module and reads no fault file at start-up

        return msgspec.convert(tomllib.loads(data.decode()), FaultConfig)
    return msgspec.json.decode(data, type=FaultConfig)
