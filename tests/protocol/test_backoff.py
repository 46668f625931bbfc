from __future__ import annotations

from itertools import islice

from protocol.backoff import Backoff


def test_delays_double_from_initial_up_to_maximum() -> None:
    delays = Backoff(initial=0.1, maximum=1.0).delays()
    assert list(islice(delays, 7)) == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_defaults_are_the_clients_100_ms_to_60_s() -> None:
    assert Backoff() == Backoff(initial=0.1, maximum=60.0, multiplier=2.0)
    assert list(islice(Backoff().delays(), 12))[-1] == 60.0


def test_each_run_of_attempts_starts_again_from_initial() -> None:
    backoff = Backoff(initial=0.25, maximum=10.0, multiplier=4.0)
    first = backoff.delays()
    assert [next(first), next(first), next(first)] == [0.25, 1.0, 4.0]
    assert next(backoff.delays()) == 0.25  # a fresh run, the first one's state untouched
    assert next(first) == 10.0
