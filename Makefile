# k8shost: the two commands a newcomer needs are `make sandbox` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# the 25 slowest setups/calls/teardowns printed by every run (before the summary line, which stays last)
PYTEST_ARGS ?= --durations=25

.PHONY: dashboards dashboard-snapshot monitoring-rules setup ovs sandbox test unit integration lint protos bench node-up node-down cluster-up cluster-down cluster-join clean image test-image boot boot-down boot-status boot-powerloss boot-resume

setup:
	@bash scripts/setup.sh

# The OVN/OVS the suite runs: Debian 13's OVN 25.03 and OVS 3.5 (ovs-vswitchd included), made
# into build/ovn-trixie by scripts/ovn-trixie.sh (docs/ovn-version.md). ~20-80 s once, then nothing.
ovs: setup
	@bash scripts/ovn-trixie.sh

protos: setup
	@bash scripts/gen-protos.sh force


node-up: setup ovs
	$(PY) -m nodeenv.cli up

node-down:
	@if [ -x $(PY) ]; then $(PY) -m nodeenv.cli down; else echo "node-down: nothing to stop (no .venv)"; fi

# N nodes (network namespaces) over a Geneve underlay, OVN central, the API double: .run-cluster/
NODES ?= $(or $(K8SHOST_NODES),3)
cluster-up: setup ovs
	$(PY) -m nodeenv.cli cluster-up --nodes $(NODES)

# the scenario on its own 3-node cluster in .run-sandbox/ (NODES=1: on one node, node-up's)
sandbox: setup ovs
	$(PY) -m nodeenv.cli sandbox --nodes $(NODES)

# one more node joins the running cluster (node N+1: its netns, chassis, agent, Node object)
cluster-join: setup ovs
	$(PY) -m nodeenv.cli cluster-join

cluster-down:
	@if [ -x $(PY) ]; then $(PY) -m nodeenv.cli cluster-down; else echo "cluster-down: nothing to stop (no .venv)"; fi

# tests/image/ starts containers from the image: built first (from scratch ~1.5 min here; no change ~5 s).
test: setup ovs image
	$(PY) -m pytest $(PYTEST_ARGS)

unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

integration: setup ovs
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

# The admin's path on this machine (docs/image-and-boot.md): the image, the API double, `kubectl
# apply -k daemonsets/overlays/k3s`, every workload booted from the image on NODES nodes (network
# namespaces; 3 by default, as an HA k3s has servers); .run-boot/. NODES=1 boots on the machine's own
# namespace: not beside node-up or a test session then (one userspace-datapath ovs-vswitchd there).
boot: setup ovs image
	$(PY) -m nodeenv.kubelet boot --nodes $(NODES)

boot-status:
	@$(PY) -m nodeenv.kubelet status

boot-down:
	@if [ -x $(PY) ]; then $(PY) -m nodeenv.kubelet down; else echo "boot-down: nothing to stop (no .venv)"; fi

# A power cut of the booted cluster, and its boot again from what the disks kept (docs/cold-restart.md).
boot-powerloss: setup
	$(PY) -m nodeenv.kubelet powerloss

boot-resume: setup ovs
	$(PY) -m nodeenv.kubelet resume

# The suite's image, in the private podman store build/podman (docs/image-and-boot.md).
image: setup
	$(PY) -m nodeenv.image build

# The image tier alone: build, then start containers from it.
test-image: image
	$(PY) -m pytest tests/image $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy cni csi webhook controllers common nodeenv ovnaccess dashboards

# Grafana dashboards as code (dashboards/catalogue.py) -> daemonsets/monitoring/dashboards/*.json
dashboards: setup
	$(PY) -m dashboards

# The overview's panels as PNGs from the booted cluster's Prometheus (make boot first): docs/dashboards/
dashboard-snapshot: setup
	$(PY) -m dashboards.snapshot

bench: setup ovs
	$(PY) -m bench $(BENCH)

clean: boot-down node-down cluster-down
	rm -rf .stamps build *.egg-info protos/*_pb2*.py protos/*_pb2.pyi

# daemonsets/monitoring/prometheusrule.yaml (prometheus-operator) regenerated from rules.yml
monitoring-rules: setup
	$(PY) -m nodeenv.prometheus.prometheusrule
