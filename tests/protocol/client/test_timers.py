"""The batch and ack-group timers: one wake-up of their task per flush, none to arm them.

Counted on trio with a virtual loop clock (``MockClock`` autojump) and an ``Instrument``: in a
simulation every task step is a round of the event loop, paid per message.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from protocol import commands as c
from protocol.client import open_client
from protocol.client.acknowledger import Acknowledger
from protocol.client.config import ConsumerConfig
from protocol.clock import Alarm, AlarmTimer, LoopAlarm, Timer
from tests.support.fake_broker import fake_broker


class LoopClock:
    """A `Clock` whose time is trio's loop clock (as the simulator's)."""

    def now(self) -> float:
        return trio.current_time()

    def wall_ns(self) -> int:
        return round(trio.current_time() * 1e9)

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    async def sleep(self, delay: float) -> None:
        await trio.sleep(max(delay, 0.0))

    def alarm(self) -> Alarm:
        return LoopAlarm(trio.current_time, lambda deadline: deadline)

    def timer(self, callback: Callable[[], None]) -> Timer:
        return AlarmTimer(self.alarm(), callback)


class Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.by_name: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.by_name[task.name.rsplit(".", 1)[-1]] += 1


def run(main: Any, steps: Steps) -> None:
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[steps])


class Connection:
    protocol_version = 20

    def __init__(self) -> None:
        self.sent: list[c.Command] = []

    def send_command(self, command: c.Command) -> None:
        self.sent.append(command)


def test_an_ack_group_costs_its_timer_one_wake_up() -> None:
    steps = Steps()
    cnx = Connection()

    async def main() -> None:
        acker = Acknowledger(
            1,
            ConsumerConfig(),
            LoopClock(),
            lambda: cnx,
            lambda: None,  # type: ignore[arg-type,return-value]
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(acker.run_ack_timer)
            for entry in range(10):
                acker.ack_position((1, entry), -1)
                await trio.sleep(1.0)  # each ack its own group (grouped for 0.1 s)
            nursery.cancel_scope.cancel()

    run(main, steps)
    assert [command.message_id[0].entry_id for command in cnx.sent] == list(range(10))  # type: ignore[attr-defined]
    assert steps.by_name["run_ack_timer"] == 1 + 10 + 1  # its start, one per group, its end


def test_a_batch_costs_its_timer_one_wake_up() -> None:
    steps = Steps()

    async def main() -> None:
        async with (
            fake_broker() as broker,
            open_client(broker.url, connector=broker.connect, clock=LoopClock()) as client,
        ):
            producer = await client.create_producer(
                "t", batching_enabled=True, batching_max_publish_delay=0.01
            )
            for i in range(10):
                await producer.send_async(b"m%d" % i)
                await trio.sleep(1.0)  # each message its own batch
            await producer.flush()
            assert len(broker.of_type(c.Send)) == 10
            await producer.aclose()

    run(main, steps)
    assert steps.by_name["_batch_timer"] == 1 + 10 + 1  # its start, one per batch, its end
