"""Generate the Python stubs under certd/v1/ from proto/certd/v1/*.proto.

Usage:
    python scripts/gen_protos.py            # write the stubs
    python scripts/gen_protos.py --check    # exit 1 when the committed stubs differ

The stubs are committed; tests/unit/test_proto_drift.py runs --check's logic.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
OUT = ROOT / "certd" / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def generate(into: Path) -> list[Path]:
    """Run protoc (grpcio-tools) for every .proto into ``into``; return the files written."""
    from grpc_tools import protoc  # dev dependency, imported only here

    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpc_python_out={into}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((into / "certd" / "v1").iterdir())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p for p in generate(Path(tmp)) if p.name.endswith(GENERATED_SUFFIXES)}
        committed = {p.name: p for p in OUT.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}
        if ns.check:
            drift = sorted(set(fresh) ^ set(committed))
            drift += [
                n
                for n in sorted(set(fresh) & set(committed))
                if not filecmp.cmp(fresh[n], committed[n], shallow=False)
            ]
            for name in drift:
                print(f"stub drift: certd/v1/{name}", file=sys.stderr)
            return 1 if drift else 0
        for name in committed.keys() - fresh.keys():
            committed[name].unlink()
        for name, path in fresh.items():
            shutil.copyfile(path, OUT / name)
        print(f"wrote {len(fresh)} files to {OUT.relative_to(ROOT)}")
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
