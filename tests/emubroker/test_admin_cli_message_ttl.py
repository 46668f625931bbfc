"""``emubroker admin``: message TTL and expire-messages commands, and pulsar-admin's time forms."""

from __future__ import annotations

import pytest

from emubroker import admin_cli
from emubroker.admin_cli import main
from emubroker.admin_cli.args import relative_seconds
from tests.emubroker.test_admin_cli import run

NS = "/admin/v2/namespaces/acme/ns"
TOPIC = "/admin/v2/persistent/public/default/t"


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (
            ["namespaces", "set-message-ttl", "acme/ns", "-ttl", "120"],
            ("POST", f"{NS}/messageTTL", 120),
        ),
        (
            ["namespaces", "set-message-ttl", "acme/ns", "--messageTTL", "3h"],
            ("POST", f"{NS}/messageTTL", 3 * 3600),
        ),
        # A negative TTL reaches the broker, which refuses it (412), as with pulsar-admin.
        (
            ["namespaces", "set-message-ttl", "acme/ns", "-ttl", "-1"],
            ("POST", f"{NS}/messageTTL", -1),
        ),
        (["namespaces", "get-message-ttl", "acme/ns"], ("GET", f"{NS}/messageTTL", None)),
        (["namespaces", "remove-message-ttl", "acme/ns"], ("DELETE", f"{NS}/messageTTL", None)),
        (
            ["topics", "expire-messages", "t", "-s", "my sub", "-t", "90"],
            ("POST", f"{TOPIC}/subscription/my%20sub/expireMessages/90", None),
        ),
        (
            ["topics", "expire-messages", "t", "--subscription", "s", "--expireTime", "2d"],
            ("POST", f"{TOPIC}/subscription/s/expireMessages/172800", None),
        ),
        (
            ["topics", "expire-messages-all-subscriptions", "acme/ns/t", "-t", "0"],
            ("POST", "/admin/v2/persistent/acme/ns/t/all_subscription/expireMessages/0", None),
        ),
    ],
)
def test_ttl_and_expiry_commands_call_pulsars_paths(
    argv: list[str], call: tuple[str, str, object]
) -> None:
    assert run(*argv).calls == [call]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45),
        ("45s", 45),
        ("100m", 6000),
        ("3H", 10800),
        ("2d", 172800),
        ("5w", 5 * 604800),
        ("1y", 365 * 86400),
        ("+7", 7),
        ("-2m", -120),
    ],
)
def test_times_are_read_like_pulsar_admins_relative_time(text: str, seconds: int) -> None:
    assert relative_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "1.5h", "3 months", "2x", "1hh"])
def test_malformed_times_are_refused(text: str) -> None:
    with pytest.raises(admin_cli.AdminError, match="invalid time"):
        relative_seconds(text)


def test_bad_times_are_readable_errors_and_send_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["namespaces", "set-message-ttl", "acme/ns", "-ttl", "soon"]) == 1
    assert capsys.readouterr().err.startswith("error: invalid time 'soon'")
    # pulsar-admin reads a negative --expireTime as "not given".
    assert main(["topics", "expire-messages", "t", "-s", "s", "-t=-5"]) == 1
    assert capsys.readouterr().err == (
        "error: Either time (--expireTime) or message position (--position) has to be provided"
        " to expire messages\n"
    )
    with pytest.raises(SystemExit) as usage:
        main(["topics", "expire-messages", "t", "-s", "s"])  # -t is required
    assert usage.value.code == 2
    with pytest.raises(SystemExit) as usage:
        main(["namespaces", "set-message-ttl", "acme/ns"])  # -ttl is required
    assert usage.value.code == 2
