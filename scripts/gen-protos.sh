#!/usr/bin/env bash
# Generates protos/*_pb2.py, *_pb2_grpc.py and *.pyi from protos/*.proto with grpcio-tools.
# Imports in the generated code are package-qualified (`from protos import csi_pb2`).
# PROTOC_PYTHON names the interpreter with grpcio-tools (default .venv's; the Containerfile's build stage).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
force=${1:-}
for proto in protos/*.proto; do
  stub="${proto%.proto}_pb2.py"
  if [ -n "$force" ] || [ ! -f "$stub" ] || [ "$proto" -nt "$stub" ]; then
    echo "protos: generating from $proto"
    "${PROTOC_PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. "$proto"
  fi
done
