"""aiohttp imported with its client's default CA certificates read at their first use.

Each test runs in a fresh interpreter: aiohttp builds its default contexts once, when it is
first imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emubroker.auth.certs import write_local_certificates

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, *args: str, ca_file: Path | None) -> list[object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SSL_CERT_FILE", None)
    if ca_file is not None:
        env["SSL_CERT_FILE"] = str(ca_file)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


IMPORTED = """
import json, os
from emubroker.aiohttp_loading import import_aiohttp

import_aiohttp()
import aiohttp.connector as connector

for context in (connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED):
    print(json.dumps(context.cert_store_stats()["x509_ca"]))
print(json.dumps(os.environ.get("SSL_CERT_FILE")))
"""


@pytest.mark.parametrize("set_by_user", [True, False])
def test_imported_the_default_contexts_hold_no_ca_and_the_environment_is_as_it_was(
    tmp_path: Path, set_by_user: bool
) -> None:
    ca_file = write_local_certificates(tmp_path).ca_cert if set_by_user else None
    verified, unverified, variable = _run(IMPORTED, ca_file=ca_file)
    assert (verified, unverified) == (0, 0)
    assert variable == (str(ca_file) if ca_file else None)


HANDSHAKE = """
import json, ssl, sys
from emubroker.aiohttp_loading import import_aiohttp

import_aiohttp()
import aiohttp.connector as connector

server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
server.load_cert_chain(sys.argv[1], sys.argv[2])


def handshake(client, hostname):
    # A TLS handshake over memory buffers, as asyncio's transport runs one (wrap_bio).
    wires = [ssl.MemoryBIO() for _ in range(4)]
    ends = [
        client.wrap_bio(wires[0], wires[1], server_hostname=hostname),
        server.wrap_bio(wires[1], wires[0], server_side=True),
    ]
    done = [False, False]
    while not all(done):
        for i, end in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as exc:
                    return exc.reason or type(exc).__name__
    return "ok"


verified = connector._SSL_CONTEXT_VERIFIED
print(json.dumps(handshake(verified, "localhost")))
print(json.dumps(handshake(verified, "not-this-host")))
print(json.dumps(type(verified) is ssl.SSLContext))
print(json.dumps(verified.get_ca_certs() == ssl.create_default_context().get_ca_certs()))
unverified = connector._SSL_CONTEXT_UNVERIFIED
print(json.dumps(handshake(unverified, "not-this-host")))
print(json.dumps([unverified.verify_mode == ssl.CERT_NONE, unverified.check_hostname]))
print(json.dumps(unverified.cert_store_stats()["x509_ca"]))
"""


def test_a_default_context_trusts_the_environments_ca_bundle_from_its_first_handshake(
    tmp_path: Path,
) -> None:
    certs = write_local_certificates(tmp_path)
    verified, wrong_host, plain, same_cas, unverified, settings, loaded = _run(
        HANDSHAKE, str(certs.broker_cert), str(certs.broker_key), ca_file=certs.ca_cert
    )
    # Verified: the server's certificate, issued by the bundle's CA, for the right host only.
    assert (verified, wrong_host) == ("ok", "CERTIFICATE_VERIFY_FAILED")
    # A plain context again, holding what aiohttp would have loaded at its import.
    assert (plain, same_cas) == (True, True)
    # Unverified: no check at all, as aiohttp made it; it loaded the bundle too, as aiohttp does.
    assert (unverified, settings, loaded) == ("ok", [True, False], 1)


ALREADY_IMPORTED = """
import json
import aiohttp.connector as connector
from emubroker.aiohttp_loading import import_aiohttp

import_aiohttp()
print(json.dumps(connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"]))
"""


def test_an_aiohttp_already_imported_keeps_its_loaded_contexts(tmp_path: Path) -> None:
    ca_file = write_local_certificates(tmp_path).ca_cert
    assert _run(ALREADY_IMPORTED, ca_file=ca_file) == [1]


CLIENT_CALL = """
import asyncio, json, ssl, sys
from emubroker.aiohttp_loading import import_aiohttp

import_aiohttp()
import aiohttp
from aiohttp import web


async def hello(request):
    return web.Response(text="hello")


async def main():
    app = web.Application()
    app.router.add_get("/", hello)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(sys.argv[1], sys.argv[2])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"https://127.0.0.1:{port}/") as reply:
                print(json.dumps(await reply.text()))
    finally:
        await runner.cleanup()


asyncio.run(main())
"""


def test_an_https_call_through_aiohttps_default_context_verifies_the_server(
    tmp_path: Path,
) -> None:
    # The way a broker calls another's https:// web service (admin/owner_admin.py): aiohttp's
    # default context, its CA bundle loaded at this first handshake, trusts the bundle's CA.
    certs = write_local_certificates(tmp_path)
    args = (str(certs.broker_cert), str(certs.broker_key))
    assert _run(CLIENT_CALL, *args, ca_file=certs.ca_cert) == ["hello"]
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _run(CLIENT_CALL, *args, ca_file=tmp_path / "broker-cert.pem")  # not a CA: untrusted
    assert "CERTIFICATE_VERIFY_FAILED" in failed.value.stderr


MIME_TYPES = """
import json, mimetypes, sys

if sys.argv[1] == "broker":
    from emubroker.aiohttp_loading import import_aiohttp

    import_aiohttp()
import aiohttp.web
from aiohttp.web_fileresponse import CONTENT_TYPES

print(json.dumps(mimetypes.inited))
print(json.dumps([CONTENT_TYPES.types_map, CONTENT_TYPES.encodings_map]))
print(json.dumps(mimetypes.guess_type("report.xlsx")))
print(json.dumps(mimetypes.types_map))
"""


def test_aiohttps_file_types_are_built_without_reading_the_systems_mime_files() -> None:
    # Its table holds Python's built-in types either way; the mimetypes module's own table,
    # which aiohttp's import initialized (reading /etc/mime.types, ~3 ms), is initialized at
    # its first use, with the same result.
    inited, table, guessed, module_table = _run(MIME_TYPES, "broker", ca_file=None)
    plain_inited, plain_table, plain_guessed, plain_module_table = _run(
        MIME_TYPES, "plain", ca_file=None
    )
    assert (inited, plain_inited) == (False, True)
    assert table == plain_table
    assert guessed == plain_guessed
    assert module_table == plain_module_table
