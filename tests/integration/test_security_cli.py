"""`standalone --tls` and `admin tokens`, as processes and with the official client."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pulsar
import pytest

from emubroker.admin_cli import main as admin_main
from tests.support.broker import standalone_process

pytestmark = pytest.mark.integration


def test_standalone_tls_makes_certificates_and_serves_pulsar_ssl(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePortTls=0\nwebServicePortTls=0\n")
    with standalone_process("--tls", "--config", str(conf)) as proc:
        text = "".join(proc.output)
        ca = Path(re.search(r"CA (\S+),", text)[1])  # type: ignore[index]
        tls = re.search(r"tls (pulsar\+ssl://\S+) (https://\S+)", text)
        assert tls is not None, text
        assert ca.exists()
        client = pulsar.Client(
            tls[1],
            tls_trust_certs_file_path=str(ca),
            operation_timeout_seconds=5,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            consumer = client.subscribe("tls-cli", "s")
            client.create_producer("tls-cli").send(b"over tls")
            assert consumer.receive(10_000).data() == b"over tls"
        finally:
            client.close()
    assert not ca.exists()  # removed on exit


def test_tokens_as_pulsar_tokens_makes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "secret.key"
    assert admin_main(["tokens", "create-secret-key", "--output", str(key)]) == 0
    assert len(key.read_bytes()) == 32
    assert admin_main(["tokens", "create", "--secret-key", f"file://{key}", "-s", "alice"]) == 0
    token = capsys.readouterr().out.strip()
    assert token.startswith("eyJhbGciOiJIUzI1NiJ9.")  # {"alg":"HS256"}, as jjwt writes it
    assert admin_main(["tokens", "show", token]) == 0
    assert capsys.readouterr().out == '{"alg":"HS256"}\n---\n{"sub":"alice"}\n'
    assert admin_main(["tokens", "validate", "-sk", f"file://{key}", token]) == 0
    assert capsys.readouterr().out == "{sub=alice}\n"
    other = tmp_path / "other.key"
    other.write_bytes(bytes(32))
    assert admin_main(["tokens", "validate", "-sk", f"file://{other}", token]) == 1
    assert "Signature verification failed" in capsys.readouterr().err


def test_create_secret_key_base64_to_stdout() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "emubroker", "admin", "tokens", "create-secret-key", "-b"],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    assert len(base64.b64decode(out)) == 32
    assert not out.endswith(b"\n")  # Pulsar writes the bytes alone


def test_key_pair_tokens_expire(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    private, public = tmp_path / "p.key", tmp_path / "pub.key"
    args = ["--output-private-key", str(private), "--output-public-key", str(public)]
    assert admin_main(["tokens", "create-key-pair", "-a", "ES256", *args]) == 0
    assert (
        admin_main(["tokens", "create", "-a", "ES256", "-pk", str(private), "-s", "b", "-e", "1h"])
        == 0
    )
    token = capsys.readouterr().out.strip()
    header, claims = (json.loads(base64.urlsafe_b64decode(p + "==")) for p in token.split(".")[:2])
    assert header == {"alg": "ES256"}
    assert claims["sub"] == "b"
    assert isinstance(claims["exp"], int)
    assert admin_main(["tokens", "validate", "-a", "ES256", "-pk", str(public), token]) == 0
