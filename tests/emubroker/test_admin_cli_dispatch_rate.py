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


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (
            ["namespaces", "set-max-producers-per-topic", "acme/ns", "-p", "3"],
            ("POST", f"{NS}/maxProducersPerTopic", 3),
        ),
        (
            [
                "namespaces",
                "set-max-consumers-per-topic",
                "acme/ns",
                "--max-consumers-per-topic",
                "0",
            ],
            ("POST", f"{NS}/maxConsumersPerTopic", 0),
        ),
        (
            ["namespaces", "set-max-consumers-per-subscription", "acme/ns", "-c", "2"],
            ("POST", f"{NS}/maxConsumersPerSubscription", 2),
        ),
        (
            ["namespaces", "set-max-subscriptions-per-topic", "acme/ns", "-m", "5"],
            ("POST", f"{NS}/maxSubscriptionsPerTopic", 5),
        ),
        (
            ["namespaces", "get-max-producers-per-topic", "acme/ns"],
            ("GET", f"{NS}/maxProducersPerTopic", None),
        ),
        (
            ["namespaces", "remove-max-subscriptions-per-topic", "acme/ns"],
            ("DELETE", f"{NS}/maxSubscriptionsPerTopic", None),
        ),
    ],
)
def test_count_limit_commands_call_pulsars_paths(
    argv: list[str], call: tuple[str, str, object]
) -> None:
    assert run(*argv).calls == [call]
