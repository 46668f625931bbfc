"""protocol/_pb/pulsar_pb2.py is committed; it must match a fresh generation from pulsar.proto."""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
from types import ModuleType

import pytest

from protocol._pb import pulsar_pb2 as pb

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen_proto() -> ModuleType:
    # scripts/ is not a package: load the generator straight from its file.
    path = ROOT / "scripts" / "gen_proto.py"
    spec = importlib.util.spec_from_file_location("gen_proto", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_module_is_fresh(gen_proto: ModuleType) -> None:
    stale = gen_proto.stale_files()
    assert stale == [], f"stale {stale}: run python scripts/gen_proto.py"


def test_a_changed_proto_is_detected(
    gen_proto: ModuleType, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Proves the check above can fail: one extra field makes the committed module stale.
    proto = (gen_proto.PROTO_DIR / "pulsar.proto").read_text()
    changed = proto.replace(
        "message CommandPing {}", "message CommandPing {\n    optional uint64 probe = 1;\n}"
    )
    assert changed != proto
    (tmp_path / "pulsar.proto").write_text(changed)
    monkeypatch.setattr(gen_proto, "PROTO_DIR", tmp_path)
    assert gen_proto.stale_files() == list(gen_proto.GENERATED)


def test_a_missing_generated_file_is_stale(
    gen_proto: ModuleType, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(gen_proto.OUT_DIR, tmp_path / "_pb")
    for name in gen_proto.GENERATED:
        (tmp_path / "_pb" / name).unlink()
    monkeypatch.setattr(gen_proto, "OUT_DIR", tmp_path / "_pb")
    assert gen_proto.stale_files() == list(gen_proto.GENERATED)


def test_every_command_field_number_equals_its_type() -> None:
    # spec §2.4: the sub-message's field number equals the BaseCommand.Type value.
    base = pb.BaseCommand.DESCRIPTOR
    types = base.fields_by_name["type"].enum_type.values_by_number
    for field in base.fields:
        if field.name != "type":
            assert field.number in types, field.name
            assert field.message_type.name.startswith("Command"), field.name
