"""The leader's unloads and splits reach the bundle's owner (``ownership.owner_calls``)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from emubroker.loadbalance.ownership.owner_calls import (
    OWNER_CALL_TIMEOUT,
    OwnerCallError,
    OwnerCalls,
    parse_bundle,
)
from emubroker.loadbalance.ownership.records import BrokerInfo, BundleOwner
from emubroker.naming import BundleRange, NamespaceBundle
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

ME = BrokerInfo("pulsar://10.0.0.1:6650", "http://10.0.0.1:8080")
OTHER = BrokerInfo("pulsar://10.0.0.2:6650", "http://10.0.0.2:8080")
BUNDLE = "public/default/0x00000000_0x80000000"
CHILDREN = ("public/default/0x00000000_0x40000000", "public/default/0x40000000_0x80000000")


class Ownership:
    def __init__(self, owner: BrokerInfo | None) -> None:
        self.me = ME
        self.owner = owner
        self.broken = False

    async def get_owner(self, bundle: NamespaceBundle) -> BundleOwner | None:
        if self.broken:
            raise OSError("store unreachable")
        return None if self.owner is None else BundleOwner(self.owner)


class Remote:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, bool]] = []
        self.fail: Exception | None = None
        self.hang = False

    async def _call(
        self, action: str, owner: BrokerInfo, bundle: NamespaceBundle, unload: bool
    ) -> None:
        self.calls.append((action, owner.http_url, str(bundle), unload))
        if self.hang:
            await anyio.sleep_forever()
        if self.fail is not None:
            raise self.fail

    async def unload(
        self, owner: BrokerInfo, bundle: NamespaceBundle, *, reason: str, destination: str
    ) -> None:
        await self._call("unload", owner, bundle, False)

    async def split(self, owner: BrokerInfo, bundle: NamespaceBundle, *, unload: bool) -> None:
        await self._call("split", owner, bundle, unload)


class Setup:
    def __init__(self, clock: FakeClock, owner: BrokerInfo | None) -> None:
        self.ownership = Ownership(owner)
        self.remote = Remote()
        self.local: list[tuple[str, str, bool]] = []
        self.affinity: list[tuple[str, str]] = []
        self.calls = OwnerCalls(
            self.ownership,
            clock,
            remote=self.remote,
            unload_local=self.unload_here,
            split_local=self.split_here,
            set_affinity=lambda r, b: self.affinity.append((r, b)),
            children_of=self.children,
        )

    async def unload_here(self, bundle: NamespaceBundle, reason: str, destination: str) -> bool:
        self.local.append(("unload", str(bundle), False))
        return True

    async def split_here(self, bundle: NamespaceBundle, unload: bool) -> Sequence[NamespaceBundle]:
        self.local.append(("split", str(bundle), unload))
        return [parse_bundle(c) for c in CHILDREN]

    async def children(self, bundle: NamespaceBundle) -> Sequence[NamespaceBundle]:
        return [parse_bundle(c) for c in CHILDREN]


def test_a_bundle_name_parses_into_namespace_and_range() -> None:
    bundle = parse_bundle(BUNDLE)
    assert str(bundle.namespace) == "public/default"
    assert bundle.bundle_range == BundleRange(0, 0x80000000)


async def test_the_leaders_own_bundle_is_unloaded_here(fake_clock: FakeClock) -> None:
    setup = Setup(fake_clock, ME)
    await setup.calls.unload(BUNDLE)
    assert setup.local == [("unload", BUNDLE, False)]
    assert setup.remote.calls == []
    assert setup.affinity == []


async def test_another_owner_gets_the_call_and_the_destination_becomes_the_affinity(
    fake_clock: FakeClock,
) -> None:
    setup = Setup(fake_clock, OTHER)
    await setup.calls.unload(BUNDLE, "10.0.0.3:8080")
    assert setup.affinity == [("0x00000000_0x80000000", "10.0.0.3:8080")]
    assert setup.remote.calls == [("unload", OTHER.http_url, BUNDLE, False)]
    assert setup.local == []


async def test_a_bundle_nobody_owns_needs_no_unload(fake_clock: FakeClock) -> None:
    setup = Setup(fake_clock, None)
    await setup.calls.unload(BUNDLE)
    assert setup.local == []
    assert setup.remote.calls == []


async def test_a_failed_call_raises_and_is_counted(fake_clock: FakeClock) -> None:
    setup = Setup(fake_clock, OTHER)
    setup.remote.fail = ConnectionRefusedError("connection refused")
    with pytest.raises(OwnerCallError, match=r"unloading .* failed: connection refused"):
        await setup.calls.unload(BUNDLE)
    setup.ownership.broken = True
    with pytest.raises(OwnerCallError, match="could not be read"):
        await setup.calls.unload(BUNDLE)
    assert setup.calls.failed_calls == 2


async def test_an_owner_that_does_not_answer_times_out_on_the_clock(
    fake_clock: FakeClock,
) -> None:
    setup = Setup(fake_clock, OTHER)
    setup.remote.hang = True
    outcome: list[BaseException] = []

    async def call() -> None:
        try:
            await setup.calls.split(BUNDLE, True)
        except OwnerCallError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await fake_clock.advance(OWNER_CALL_TIMEOUT - 1)
        assert outcome == []
        await fake_clock.advance(1)
    assert len(outcome) == 1
    assert "no answer within 60.0 s" in str(outcome[0])
    assert setup.calls.failed_calls == 1


async def test_a_split_goes_to_the_owner_and_returns_the_children(fake_clock: FakeClock) -> None:
    here = Setup(fake_clock, ME)
    assert await here.calls.split(BUNDLE, True) == list(CHILDREN)
    assert here.local == [("split", BUNDLE, True)]
    there = Setup(fake_clock, OTHER)
    assert await there.calls.split(BUNDLE, False) == list(CHILDREN)
    assert there.remote.calls == [("split", OTHER.http_url, BUNDLE, False)]
    nobody = Setup(fake_clock, None)  # the split endpoint acquires an unowned bundle
    await nobody.calls.split(BUNDLE, True)
    assert nobody.local == [("split", BUNDLE, True)]
