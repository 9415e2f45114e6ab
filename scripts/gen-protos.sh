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
# Kubernetes' wire contract (protos/k8s, see protos/k8s/README.md): one descriptor set the API double
# loads to decode protobuf request bodies.
k8s_set=protos/k8s/descriptors.pb
if [ -n "$force" ] || [ ! -f "$k8s_set" ] || [ -n "$(find protos/k8s -name '*.proto' -newer "$k8s_set")" ]; then
  echo "protos: generating $k8s_set"
  py=${PROTOC_PYTHON:-.venv/bin/python}
  [[ $py == /* ]] || py=$PWD/$py
  (cd protos/k8s && find k8s.io -name '*.proto' | sort | xargs "$py" -m grpc_tools.protoc -I. \
    --include_imports --descriptor_set_out=descriptors.pb 2>&1 | { grep -v 'is unused' || true; } >&2)
fi
