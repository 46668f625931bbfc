"""``SessionBook``: heartbeats due, and when a session is lost to the stub's silence."""

from __future__ import annotations

import math

from storage_stub.sessions import SessionBook


def test_heartbeats_are_due_every_third_of_the_timeout() -> None:
    book = SessionBook()
    assert book.next_heartbeat() == math.inf
    book.keep(7, 3.0, now=0.0)
    assert book.next_heartbeat() == 1.0
    assert book.due(0.5) == []
    assert book.due(1.0) == [(7, 3.0)]
    assert book.next_heartbeat() == 2.0


def test_a_session_is_lost_when_unanswered_for_its_whole_timeout() -> None:
    book = SessionBook()
    book.keep(7, 3.0, now=0.0)
    assert not book.unanswered(7, now=2.0)  # one silent heartbeat, 2 s since the last answer
    assert book.unanswered(7, now=3.0)  # two in a row, and the whole timeout
    assert not book.alive(7)
    assert book.due(10.0) == []
    assert not book.unanswered(7, now=4.0)  # lost once


def test_an_answer_starts_the_count_again() -> None:
    book = SessionBook()
    book.keep(7, 3.0, now=0.0)
    assert not book.unanswered(7, now=2.0)
    book.answered(7, now=2.5)
    assert not book.unanswered(7, now=4.0)
    assert not book.unanswered(7, now=4.9)  # two in a row, but answered only 2.4 s ago
    assert book.unanswered(7, now=5.5)
    assert not book.alive(7)


def test_timers_that_wake_a_little_late_do_not_delay_the_loss_by_a_heartbeat() -> None:
    book = SessionBook()
    book.keep(7, 30.0, now=0.0)
    book.answered(7, now=10.002)  # the heartbeat sent at 10 s, answered 2 ms later
    assert not book.unanswered(7, now=30.001)  # sent at 20.001 s, a third of a timeout late
    assert book.unanswered(7, now=40.001)  # a timeout after the last sent answered one
    # (its answer came 2 ms after it was sent: strictly, 29.999 s of silence)


def test_a_process_that_wakes_from_a_freeze_is_not_lost_by_its_one_heartbeat_in_flight() -> None:
    book = SessionBook()
    book.keep(7, 3.0, now=0.0)
    book.answered(7, now=1.0)
    # Frozen at 1.5 s with a heartbeat in flight; woken at 60 s, when it times out.
    assert not book.unanswered(7, now=60.0)
    assert book.alive(7)  # the next heartbeat learns from the stub that the session expired


def test_a_restarted_stub_ends_every_session() -> None:
    book = SessionBook()
    book.keep(1, 3.0, now=0.0)
    book.keep(2, 3.0, now=0.0)
    assert book.end_all() == 2
    assert not book.alive(1)
    assert not book.alive(2)
    assert book.alive(3)  # never kept here: nothing known against it
