"""Regenerate protocol/_pb/pulsar_pb2.py from protocol/pulsar.proto.

Usage: python scripts/gen_proto.py [--check]

With --check, nothing is written; the exit status says whether the committed module is stale.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protocol"
OUT_DIR = PROTO_DIR / "_pb"
GENERATED = ("pulsar_pb2.py",)


def generate(out_dir: pathlib.Path) -> None:
    code = protoc.main(
        [
            "protoc",
            f"-I{PROTO_DIR}",
            f"--python_out={out_dir}",
            str(PROTO_DIR / "pulsar.proto"),
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")


def stale_files() -> list[str]:
    """Names of generated files whose committed text differs from a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(pathlib.Path(tmp))
        return [
            name
            for name in GENERATED
            if not (OUT_DIR / name).exists()
            or (OUT_DIR / name).read_text() != (pathlib.Path(tmp) / name).read_text()
        ]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_files()
        if stale:
            print("stale generated files:", ", ".join(stale), "- run scripts/gen_proto.py")
            return 1
        return 0
    OUT_DIR.mkdir(exist_ok=True)
    generate(OUT_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
