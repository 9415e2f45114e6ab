"""grpc_tools.protoc compiles every .proto with no warning, and the imported stubs are not stale."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

REPO = Path(__file__).resolve().parents[3]
PROTOS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "protos").glob("*.proto"))


def _protoc(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I.", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def test_there_are_protos() -> None:
    assert "protos/csi.proto" in PROTOS
    assert len(PROTOS) == 6


def test_protoc_runs_clean_with_no_warnings(tmp_path: Path) -> None:
    out = str(tmp_path)
    proc = _protoc(f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", *PROTOS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""
    for proto in PROTOS:
        stem = proto.removesuffix(".proto")
        assert (tmp_path / f"{stem}_pb2.py").is_file()
        assert (tmp_path / f"{stem}_pb2_grpc.py").is_file()


def _strip_json_names(messages) -> None:
    """The Python generator leaves json_name out of the embedded descriptor; drop it here too."""
    for msg in messages:
        for field in msg.field:
            field.ClearField("json_name")
        _strip_json_names(msg.nested_type)


@pytest.mark.parametrize("proto", PROTOS)
def test_imported_stub_matches_freshly_compiled_descriptor(proto: str, tmp_path: Path) -> None:
    out = tmp_path / "set.pb"
    proc = _protoc(f"--descriptor_set_out={out}", proto)
    assert proc.returncode == 0, proc.stderr
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    _strip_json_names(fresh.message_type)
    for ext in fresh.extension:
        ext.ClearField("json_name")
    module = importlib.import_module(proto.removesuffix(".proto").replace("/", ".") + "_pb2")
    imported = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert imported == fresh, f"{proto}: stubs are stale; run `make protos`"
