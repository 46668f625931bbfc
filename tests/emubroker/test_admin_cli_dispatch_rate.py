"""``emubroker admin namespaces {set,get,remove}-[subscription-]dispatch-rate``."""

from __future__ import annotations

import pytest

from tests.emubroker.test_admin_cli import run

NS = "/admin/v2/namespaces/acme/ns"


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (
            ["namespaces", "set-dispatch-rate", "acme/ns", "-md", "10", "-dt", "2"],
            (
                "POST",
                f"{NS}/dispatchRate",
                {
                    "dispatchThrottlingRateInMsg": 10,
                    "dispatchThrottlingRateInByte": -1,
                    "ratePeriodInSecond": 2,
                    "relativeToPublishRate": False,
                },
            ),
        ),
        (
            ["namespaces", "set-subscription-dispatch-rate", "acme/ns", "-bd", "4096", "-rp"],
            (
                "POST",
                f"{NS}/subscriptionDispatchRate",
                {
                    "dispatchThrottlingRateInMsg": -1,
                    "dispatchThrottlingRateInByte": 4096,
                    "ratePeriodInSecond": 1,
                    "relativeToPublishRate": True,
                },
            ),
        ),
        (["namespaces", "get-dispatch-rate", "acme/ns"], ("GET", f"{NS}/dispatchRate", None)),
        (
            ["namespaces", "remove-subscription-dispatch-rate", "acme/ns"],
            ("DELETE", f"{NS}/subscriptionDispatchRate", None),
        ),
    ],
)
def test_dispatch_rate_commands_call_pulsars_paths(
    argv: list[str], call: tuple[str, str, object]
) -> None:
    assert run(*argv).calls == [call]
