#!/usr/bin/env bash
# Installs everything the suite needs on this machine, idempotently:
# Debian packages (once, after one apt-get update), a virtualenv in .venv with the
# package and its dev dependencies, and the generated gRPC stubs.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # Debian 12's OVS/OVN: the suite runs none of them (it runs build/ovn-trixie, `make ovs`); kept for
  # tests/unit/daemonsets/test_image.py, which finds the packages of the programs the manifests run
  # in the image by their owners on this machine (python3-openvswitch below: scripts/ovs_json_accel.py)
  openvswitch-switch openvswitch-common ovn-central ovn-host ovn-common
  iproute2 ethtool e2fsprogs xfsprogs util-linux mount kmod iptables
  iputils-ping containernetworking-plugins procps python3-openvswitch
  dnsperf knot bind9-dnsutils
  gdb  # nodeenv.evidence: backtraces of OVS/OVN cores
  podman runc busybox-static  # a real runtime for the CNI tests (runc: crun 1.8 refuses hybrid cgroups)
  mmdebstrap  # make image: the Debian base image, made from this machine's apt sources
  prometheus  # promtool check/test rules in make test; the Prometheus of cluster mode (nodeenv/prometheus)
  victoria-metrics  # make boot: vmagent's kubernetes_sd_configs (Debian's prometheus has none)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Debian service units must not start a system OVS/OVN that would compete with
# the embedded node environment; we run our own daemons in .run/.
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
mkdir -p .stamps
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat .stamps/venv 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python dependencies into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  echo "$want" > .stamps/venv
fi
.venv/bin/python scripts/ovs_json_accel.py

# Generated stubs: regenerated when any .proto is newer than its stub.
bash scripts/gen-protos.sh
