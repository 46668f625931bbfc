"""Which metadata sessions a client keeps alive, and when one counts as lost (pure: takes ``now``).

A session kept alive gets a heartbeat every third of its timeout (``StubChannel`` sends them).
It ends when the stub says so (expired, or a new stub incarnation), or, for the client, when the
stub stays silent: a heartbeat goes unanswered while none was answered for the session's whole
timeout (give or take the timers' lateness, :data:`_LATE`). Then nothing proves the session
still lives on the stub (ZooKeeper's ``SessionLost``): about a timeout after the stub went away,
before requests made meanwhile (which wait for the request timeout, 30 s) fail. It also takes
:data:`SILENT_HEARTBEATS` unanswered in a row: a process that was frozen (SIGSTOP) past its
timeout wakes with one heartbeat in flight, which fails, but the next one is answered
("expired"), so it finds its session expired rather than the stub unreachable.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

__all__ = ["SILENT_HEARTBEATS", "SessionBook"]

SILENT_HEARTBEATS: Final = 2
"""Unanswered heartbeats in a row, at least, before a session is lost for the stub's silence:
more than the one a frozen process wakes up with."""

_LATE: Final = 1 / 6
"""How much short of a whole timeout the silence may measure and still lose the session, as a
share of the timeout. The second silent heartbeat fails a timeout after the last answered one
was sent, give or take the timers' lateness and the answer's latency (milliseconds); without this
slack the session would be lost a heartbeat later, after requests made meanwhile time out. A
sixth stays far above the two thirds of a timeout that one silent heartbeat spans."""


class _Kept(msgspec.Struct):
    timeout: float
    next_heartbeat: float
    answered: float  # when the stub last confirmed the session
    silent: int = 0  # unanswered heartbeats in a row


class SessionBook:
    """The sessions kept alive and those known to have ended."""

    def __init__(self) -> None:
        self._kept: dict[int, _Kept] = {}
        self._ended: set[int] = set()

    def keep(self, session: int, timeout: float, now: float) -> None:
        """Heartbeat ``session`` from now on (just created or confirmed at ``now``)."""
        self._kept[session] = _Kept(timeout, now + timeout / 3, answered=now)

    def end(self, session: int) -> None:
        """Stop heartbeating ``session``; it counts as ended."""
        self._kept.pop(session, None)
        self._ended.add(session)

    def end_all(self) -> int:
        """Every session kept alive ended (the stub restarted); returns how many."""
        count = len(self._kept)
        self._ended.update(self._kept)
        self._kept.clear()
        return count

    def alive(self, session: int) -> bool:
        return session not in self._ended

    def next_heartbeat(self) -> float:
        """When the earliest heartbeat is due; ``inf`` with no session kept."""
        return min((kept.next_heartbeat for kept in self._kept.values()), default=math.inf)

    def due(self, now: float) -> list[tuple[int, float]]:
        """The sessions whose heartbeat is due at ``now``, with their timeouts.

        Their next heartbeats are scheduled a third of the timeout later.
        """
        due = []
        for session, kept in self._kept.items():
            if kept.next_heartbeat <= now:
                kept.next_heartbeat = now + kept.timeout / 3
                due.append((session, kept.timeout))
        return due

    def answered(self, session: int, now: float) -> None:
        """The stub confirmed ``session`` at ``now``."""
        kept = self._kept.get(session)
        if kept is not None:
            kept.answered, kept.silent = now, 0

    def unanswered(self, session: int, now: float) -> bool:
        """A heartbeat of ``session`` got no answer at ``now``.

        Returns:
            Whether the session is now lost (it is then ended).
        """
        kept = self._kept.get(session)
        if kept is None:
            return False  # ended meanwhile
        kept.silent += 1
        if kept.silent < SILENT_HEARTBEATS or now - kept.answered < kept.timeout * (1 - _LATE):
            return False
        self.end(session)
        return True
