"""`prismnet-install`, run as the DaemonSet's init container runs it: the conflist names the
agent's socket, and the shim copied onto the host works on its own from what was written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.cni.test_cni_shim import FakeAgent

ROOT = Path(__file__).resolve().parents[3]
INSTALLER = Path(sys.executable).parent / "prismnet-install"


def _pod_spec() -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "daemonsets" / "cni" / "node-agent.yaml").read_text())
    doc = next(d for d in docs if d and d["kind"] == "DaemonSet")
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def _env(container: dict[str, Any]) -> dict[str, str]:
    """The container's env with the ConfigMap references resolved to sample values."""
    samples = {"OVN_NB_DB": "tcp:10.0.0.5:6641", "CLUSTER_CIDR": "10.244.0.0/16"}
    out = {}
    for e in container["env"]:
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        if ref or "value" in e:  # fieldRefs (the node name) do not reach the conflist
            out[e["name"]] = samples[ref["key"]] if ref else e["value"]
    return out


def _install(root: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [str(INSTALLER), *[str(root) if a == "/host" else a for a in args]]  # /host: the host mount
    return subprocess.run(argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True)


def test_daemonset_installer_writes_the_agents_socket_into_the_conflist(tmp_path: Path) -> None:
    spec = _pod_spec()
    init = next(c for c in spec["initContainers"] if c["name"] == "install-cni")
    agent = next(c for c in spec["containers"] if c["name"] == "prismnet-agent")
    proc = _install(tmp_path, init["args"], _env(init))
    assert proc.returncode == 0, proc.stderr
    conflist = json.loads((tmp_path / "etc/cni/net.d/10-prismnet.conflist").read_text())
    plugin = conflist["plugins"][0]
    agent_env = _env(agent)
    assert plugin["agentSocket"] == agent_env["PRISMNET_SOCKET"]
    assert plugin["ovn"]["northbound"] == agent_env["PRISMNET_OVN_NB_DB"]
    assert plugin["ipam"]["subnet"] == agent_env["PRISMNET_CLUSTER_CIDR"]
    assert conflist["plugins"][1] == {"type": "portmap", "capabilities": {"portMappings": True}}
    launcher = (tmp_path / "opt/cni/bin/prismnet").read_text()
    assert launcher.startswith("#!/usr/bin/python3 -IS\n") and "'/opt/cni/lib/prismnet'" in launcher
    # the mounts cover every file written
    mounts = [m["mountPath"] for m in init["volumeMounts"]]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(any(f"/host{str(p)[len(str(tmp_path)) :]}".startswith(m) for m in mounts) for p in written)


def test_the_copied_shim_reaches_the_agent_named_by_the_conflist(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "install-agent.sock"
    root = tmp_path / "host"
    proc = _install(
        root, ["--host-root", str(root), "--lib-dir", "/opt/lib/pn"], {"PRISMNET_SOCKET": str(sock)}
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (root / "opt/lib/pn/cni").iterdir()) == [
        "__init__.py",
        "errors.py",
        "shim.py",
    ]
    fake = FakeAgent(sock, 200, b'{"cniVersion":"1.0.0"}')
    try:
        conflist = json.loads((root / "etc/cni/net.d/10-prismnet.conflist").read_text())
        netconf = {**conflist["plugins"][0], "name": conflist["name"], "cniVersion": conflist["cniVersion"]}
        # the host's view: only the copied modules on sys.path, no PRISMNET variable
        lib = str(root / "opt/lib/pn")
        shim = f"import sys; sys.path.insert(0, {lib!r}); from cni.shim import main; sys.exit(main())"
        for command in ("ADD", "VERSION"):
            run = subprocess.run(
                [sys.executable, "-IS", "-c", shim],
                input=json.dumps(netconf).encode(),
                env={"CNI_COMMAND": command, "CNI_CONTAINERID": "c1"},
                capture_output=True,
            )
            assert run.returncode == 0, run.stdout
        assert len(fake.requests) == 1  # ADD reached the agent; VERSION is answered locally
    finally:
        sock.unlink(missing_ok=True)


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    proc = _install(tmp_path, ["--host-root", str(tmp_path), "--cluster-cidr", "10.0.0.0/30"], {})
    assert proc.returncode == 2 and "subnet prefix" in proc.stderr
    proc = _install(tmp_path, ["--host-root", str(tmp_path), "--lib-dir", "rel/dir"], {})
    assert proc.returncode == 2 and "absolute" in proc.stderr
    assert not (tmp_path / "etc").exists()
