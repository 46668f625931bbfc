"""A starting broker imports only what serving needs (docs/performance.md, "start-up")."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from emubroker.__main__ import _command, _parser
from emubroker.admin.routing import ROUTE_MODULES

# Loaded on first use, never by ``emubroker standalone`` before it serves: the admin CLI and the
# cluster supervisor (and PyJWT and cryptography with them), the token and TLS authentication
# providers, the Pulsar client (the health check's), the etcd client, the Avro schema code,
# pyarrow and rich; the crc32c package's __init__, with importlib.metadata (protocol.checksum
# loads its extension alone); and the TOML parser, until a .toml file is read.
NOT_AT_START = (
    "emubroker.admin_cli",
    "emubroker.cluster.cli",
    "emubroker.cluster.running",
    "emubroker.auth.token",
    "emubroker.auth.tls",
    "jwt",
    "cryptography",
    "protocol.client",
    "emubroker.metadata.etcd",
    "emubroker.schemas.avro",
    "emubroker.schemas.resolution",
    "pyarrow",
    "rich",
    "crc32c",
    "importlib.metadata",
    "tomllib",
)

# Loaded at first use by a standalone broker, but by the zygote before it forks, since every
# broker of a cluster uses them at once (docs/performance.md): the admin routes' handlers and
# their helpers, loaded at the first admin request (emubroker.admin.routing; every route is
# registered without them), and the stub's client and its connection, which a broker on
# in-process storage never uses.
AT_FIRST_USE = (
    *(f"emubroker.admin.{name}" for name in ROUTE_MODULES),
    "emubroker.admin.policy_bodies",
    "emubroker.admin.partition_fanout",
    "emubroker.dashboard.model",
    "importlib.resources",
    "storage_stub.stub_client",
    "storage_stub.channel",
    "storage_stub.messages",
    "storage_stub.faults",
)

STANDALONE_IMPORTS = """
import sys
from emubroker.__main__ import _command, _parser

_parser(_command(["standalone", "--port", "0"])).parse_args(["standalone", "--port", "0"])
import emubroker.app, emubroker.metadata.session_loss, emubroker.net.accepting

print(" ".join(name for name in sys.argv[1:] if name in sys.modules))
"""


def test_a_standalone_broker_imports_none_of_the_modules_it_does_not_serve_with() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STANDALONE_IMPORTS, *NOT_AT_START, *AT_FIRST_USE],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == []


SUPERVISOR_IMPORTS = """
import sys
from emubroker.__main__ import _command, _parser

_parser(_command(["cluster", "-n", "3"])).parse_args(["cluster", "-n", "3"])
import emubroker.cluster.cli

print(" ".join(name for name in sys.argv[1:] if name in sys.modules))
"""


SUPERVISOR_LEAVES_OUT = (
    "emubroker.app",
    "emubroker.dashboard.cli",
    "aiohttp",
    "emubroker.admin_cli",
)


def test_the_cluster_supervisor_imports_neither_the_broker_nor_the_dashboard() -> None:
    # It only spawns and watches processes: the broker's modules, aiohttp and the dashboard's
    # replay would be ~0.4 s of CPU before its first child starts.
    done = subprocess.run(
        [sys.executable, "-c", SUPERVISOR_IMPORTS, *SUPERVISOR_LEAVES_OUT],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == []


def test_the_command_is_the_first_word_that_is_not_an_option() -> None:
    assert _command(["-h"]) is None
    assert _command(["standalone", "--port", "0"]) == "standalone"
    assert _command(["admin", "--admin-url", "http://x", "topics", "list"]) == "admin"


def test_every_command_lists_the_same_commands_in_the_top_level_help() -> None:
    # admin and cluster are listed with a line of help when another command runs: the same line
    # as their own parsers give.
    helps = {command: _parser(command).format_help() for command in ("standalone", "admin")}
    assert helps["standalone"] == helps["admin"] == _parser("cluster").format_help()
    assert helps["standalone"] == _parser("dashboard").format_help() == _parser().format_help()
    assert "administer a running broker" in helps["standalone"]


def test_the_admin_and_cluster_commands_parse_their_own_arguments() -> None:
    args = _parser("admin").parse_args(["admin", "tenants", "list"])
    assert (args.command, args.resource) == ("admin", "tenants")
    assert _parser("cluster").parse_args(["cluster", "-n", "2"]).brokers == 2
    assert _parser("dashboard").parse_args(["dashboard", "runs/x"]).command == "dashboard"


ZYGOTE_IMPORTS = """
import sys, threading
from emubroker.zygote import import_broker_modules

import_broker_modules()
print(threading.active_count(), " ".join(name for name in sys.argv[1:] if name in sys.modules))
"""


def test_the_zygote_imports_what_a_broker_serves_with_and_starts_no_thread() -> None:
    # It forks brokers from these imports: a thread started by one would be missing from every
    # broker (the zygote would refuse to fork), and the modules left out of NOT_AT_START would
    # each be imported again by every broker.
    done = subprocess.run(
        [sys.executable, "-c", ZYGOTE_IMPORTS, *NOT_AT_START, "anyio._backends._asyncio"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["1", "anyio._backends._asyncio"]


ZYGOTE_AT_FIRST_USE = """
import sys
from emubroker.zygote import import_broker_modules

import_broker_modules()
print(" ".join(name for name in sys.argv[1:] if name not in sys.modules))
"""


def test_the_zygote_imports_what_every_broker_of_a_cluster_uses_at_once() -> None:
    # Imported once and shared by the forks, not by each broker at its first admin request
    # or stub connection.
    done = subprocess.run(
        [sys.executable, "-c", ZYGOTE_AT_FIRST_USE, *AT_FIRST_USE],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == []


ZYGOTE_ROUTES = """
import re
from emubroker.admin import build_admin_app
from emubroker.admin.routing import compile_patterns
from emubroker.zygote import warm_route_patterns

warm_route_patterns()
warmed = dict(re._cache)
compile_patterns(build_admin_app(None))  # what a child's first requests compile
print(len(warmed), len(re._cache) - len(warmed), all(re._cache[k] is v for k, v in warmed.items()))
"""


def until_ready(prelude: str) -> str:
    """A program that runs ``emubroker standalone`` in its process until the ready line.

    ``prelude`` runs first and defines ``report()``; at the ready line the program writes what
    ``report()`` returns, as one line, and exits at once.
    """
    return (
        "import os, sys\n"
        + prelude
        + """

class AtReady:
    def write(self, text):
        if " ready: " in text:
            os.write(1, (report() + "\\n").encode())
            os._exit(0)
        return len(text)

    def flush(self):
        pass


sys.stdout = AtReady()
from emubroker.__main__ import main

main(["standalone", "--port", "0", "--admin-port", "0", "--log-level", "ERROR"])
"""
    )


ZYGOTE_CA = """
from emubroker.zygote import import_broker_modules

import_broker_modules()
import aiohttp.connector

print(aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"])
"""

# ``emubroker standalone`` in this process, its stdout a writer that, at the ready line, prints
# how many CA certificates aiohttp's default client context holds, and exits.
STANDALONE_CA = until_ready(
    """
def report():
    import aiohttp.connector

    return str(aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"])
"""
)


@pytest.mark.parametrize("start", [ZYGOTE_CA, STANDALONE_CA], ids=["zygote", "standalone"])
def test_a_starting_broker_reads_no_ca_bundle(start: str) -> None:
    # aiohttp's client loads the system's CA bundle for its default TLS contexts when it is
    # imported (~40 ms of CPU, ~2 MiB); a broker's are loaded at their first handshake
    # (emubroker/aiohttp_loading.py, tests/emubroker/test_aiohttp_loading.py).
    done = subprocess.run(
        [sys.executable, "-c", start], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["0"]


def test_a_broker_forked_from_the_zygote_compiles_no_route_pattern() -> None:
    # A broker compiles a pattern per admin route (~15 ms of CPU, at its first requests); the
    # zygote's warm-up leaves them all in re's cache, so a child's own admin app adds none.
    done = subprocess.run(
        [sys.executable, "-c", ZYGOTE_ROUTES], capture_output=True, text=True, check=True
    )
    cached, added, kept = done.stdout.split()
    assert int(cached) > 100
    assert (added, kept) == ("0", "True")


def test_the_broker_reports_the_version_pyproject_gives_without_importlib_metadata() -> None:
    # A constant, not importlib.metadata's lookup (importlib.metadata is in NOT_AT_START): the
    # two must name the same version.
    from emubroker import __version__
    from emubroker.handlers.common import SERVER_VERSION
    from emubroker.loadbalance.reporting.wiring import BROKER_VERSION

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert __version__ == project["project"]["version"]
    assert f"emubroker-{__version__}" == SERVER_VERSION
    assert __version__ == BROKER_VERSION


# ``emubroker standalone`` in this process until its ready line, then the NOT_AT_START modules
# it has loaded by then: building and starting the broker and its admin app included.
STANDALONE_AT_READY = until_ready(
    """
def report():
    return " ".join(name for name in sys.argv[1:] if name in sys.modules)
"""
)


def test_a_standalone_broker_has_loaded_none_of_them_at_its_ready_line() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STANDALONE_AT_READY, *NOT_AT_START, *AT_FIRST_USE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == []


CONFIG_TABLES = """
import emubroker.config as config
import emubroker.dynamic_config as dynamic

config.load_config(overrides={"brokerServicePort": 0, "webServicePort": 0}, environ={})
tables = (config._list_keys, config._field_types, dynamic._boolean_keys)
print(*(table.cache_info().currsize for table in tables))
"""


def test_a_start_from_flags_builds_none_of_the_configuration_key_tables() -> None:
    # Each evaluates BrokerConfig's ~500 annotations again (~2 ms): they are built when a
    # string value is split, a bad value explained or a dynamic override applied.
    done = subprocess.run(
        [sys.executable, "-c", CONFIG_TABLES], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["0", "0", "0"]


# The dataclasses of ours that ``emubroker standalone`` builds by its ready line.
DATACLASSES_AT_READY = until_ready(
    """
import dataclasses

built = []
process_class = dataclasses._process_class


def recording(cls, *args, **kwargs):
    if cls.__module__.split(".")[0] in ("emubroker", "protocol", "storage_stub"):
        built.append(f"{cls.__module__}.{cls.__qualname__}")
    return process_class(cls, *args, **kwargs)


dataclasses._process_class = recording


def report():
    return " ".join(sorted(built))
"""
)

# A dataclass writes its __init__, __repr__, __eq__, __hash__ and (frozen) __setattr__ as source
# and compiles them as its module is imported: 0.5-5 ms each, ~18 ms over the 18 a start built.
# The records built at start are msgspec Structs (made in C); TopicName is left: it keeps two
# cached fields out of its equality, which a Struct cannot.
DATACLASSES_LEFT = ("emubroker.naming.TopicName",)


def test_a_standalone_broker_builds_only_the_listed_dataclasses_of_ours() -> None:
    done = subprocess.run(
        [sys.executable, "-c", DATACLASSES_AT_READY],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert tuple(done.stdout.split()) == DATACLASSES_LEFT
