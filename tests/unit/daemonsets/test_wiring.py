"""The pieces that must name the same thing do: the CSI driver's socket as its sidecars and kubelet's
registrar reach it (resolved through the volumes each container mounts), the driver name in every
object, and the IAM webhook's kubeconfig against the address, path and certificates it serves with."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from cryptography import x509

from csi.settings import DRIVER_NAME
from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import K3S, container_env, containers, find, ident, objects, pod_spec
from webhook.settings import PATH as WEBHOOK_PATH

Obj = dict[str, Any]
CSI_WORKLOADS = ["lightningstor-csi-controller", "lightningstor-csi-node"]


def resolve(workload: Obj, container: Obj, path: str) -> tuple[str, str]:
    """(where, relative path) a container path lands on: the volume of the longest mount holding it;
    a hostPath volume resolves to `host:<host path>` so two volumes of one host dir agree."""
    p = PurePosixPath(path)
    mounts = [m for m in container.get("volumeMounts") or [] if p.is_relative_to(m["mountPath"])]
    assert mounts, f"{ident(workload)}/{container['name']}: {path} is on no mounted volume"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    rel = str(p.relative_to(mount["mountPath"]))
    volume = next(v for v in pod_spec(workload)["volumes"] if v["name"] == mount["name"])
    if "hostPath" in volume:
        return "host", str(PurePosixPath(volume["hostPath"]["path"]) / rel)
    return mount["name"], rel


def _flag(container: Obj, name: str) -> str | None:
    for a in container.get("args") or []:
        if a.startswith(f"{name}="):
            return str(a.split("=", 1)[1])
    return None


def _driver(workload: Obj) -> tuple[Obj, Any]:
    (c,) = [c for c in containers(workload) if (c.get("command") or [""])[0] == "lightningstor-csi"]
    return c, programs.parse("lightningstor-csi", c.get("args") or [], container_env(workload, c))


@pytest.mark.parametrize("name", CSI_WORKLOADS)
def test_every_sidecar_reaches_the_driver_socket(name: str) -> None:
    w = find("Deployment" if name.endswith("controller") else "DaemonSet", name)
    driver, settings = _driver(w)
    assert settings.endpoint.startswith("unix://")
    socket = resolve(w, driver, settings.endpoint.removeprefix("unix://"))
    sidecars = [c for c in containers(w) if c is not driver]
    assert sidecars
    for c in sidecars:
        address = _flag(c, "--csi-address")
        assert address, f"{ident(w)}/{c['name']}: no --csi-address"
        assert resolve(w, c, address.removeprefix("unix://")) == socket, f"{ident(w)}/{c['name']}"


def test_registrar_registers_the_host_path_of_the_node_socket() -> None:
    w = find("DaemonSet", "lightningstor-csi-node")
    driver, settings = _driver(w)
    where, host_path = resolve(w, driver, settings.endpoint.removeprefix("unix://"))
    assert where == "host" and host_path == f"/var/lib/kubelet/plugins/{DRIVER_NAME}/csi.sock"
    (registrar,) = [c for c in containers(w) if "node-driver-registrar" in c["image"]]
    assert _flag(registrar, "--kubelet-registration-path") == host_path
    assert resolve(w, registrar, "/registration/x") == ("host", "/var/lib/kubelet/plugins_registry/x")


@pytest.mark.parametrize("name", CSI_WORKLOADS)
def test_driver_health_probe_is_the_livenessprobe_sidecar_port(name: str) -> None:
    w = find("Deployment" if name.endswith("controller") else "DaemonSet", name)
    driver, _ = _driver(w)
    (sidecar,) = [c for c in containers(w) if "livenessprobe" in c["image"]]
    port = int((_flag(sidecar, "--http-endpoint") or ":9808").rpartition(":")[2])
    probe = driver["livenessProbe"]["httpGet"]
    named = {p["name"]: p["containerPort"] for p in driver.get("ports") or []}
    assert named.get(probe["port"], probe["port"]) == port and probe["path"] == "/healthz"


def test_driver_name_is_the_same_everywhere() -> None:
    assert find("CSIDriver", DRIVER_NAME)
    for o in objects():
        if o["kind"] == "StorageClass":
            assert o["provisioner"] == DRIVER_NAME, ident(o)
        if o["kind"] in ("VolumeSnapshotClass", "VolumeGroupSnapshotClass"):
            assert o["driver"] == DRIVER_NAME, ident(o)


def test_only_the_csi_node_plugin_mounts_with_bidirectional_propagation() -> None:
    found = {(ident(w), c["name"]) for w in objects() if w["kind"] in ("DaemonSet", "Deployment")
             for c in containers(w) for m in c.get("volumeMounts") or []
             if m.get("mountPropagation") == "Bidirectional"}  # fmt: skip
    assert found == {("DaemonSet/kube-system/lightningstor-csi-node", "lightningstor-csi")}


def test_cni_installer_writes_the_socket_and_networks_the_agent_serves() -> None:
    w = find("DaemonSet", "prismnet-agent")
    spec = pod_spec(w)
    (installer,) = spec["initContainers"]
    (agent,) = [c for c in spec["containers"] if c["command"] == ["prismnet-agent"]]
    conf = programs.parse("prismnet-install", installer.get("args") or [], container_env(w, installer))
    served = programs.parse("prismnet-agent", agent.get("args") or [], container_env(w, agent))
    assert (conf.socket, conf.ovn_nb_db, conf.cluster_cidr) == (
        served.socket,
        served.ovn_nb_db,
        served.cluster_cidr,
    )
    where, host_path = resolve(w, agent, served.socket)
    assert where == "host", "kubelet runs the shim on the host: the agent's socket must be on a hostPath"
    assert host_path == str(served.socket), (
        "the conflist names the agent's path, which must be the same on the host"
    )


# --- IAM webhook ------------------------------------------------------------------------------------


def _webhook() -> tuple[Obj, Obj, Any]:
    w = find("DaemonSet", "iam-webhook")
    (c,) = pod_spec(w)["containers"]
    return (
        w,
        c,
        programs.parse("iam-webhook", [*c["command"][1:], *(c.get("args") or [])], container_env(w, c)),
    )


def _source(w: Obj, c: Obj, path: Path) -> tuple[str, str, str]:
    """(volume kind, object name, key) a file in the container comes from."""
    where, rel = resolve(w, c, str(path))
    volume = next(v for v in pod_spec(w)["volumes"] if v["name"] == where)
    if "secret" in volume:
        return "secret", volume["secret"]["secretName"], rel
    return "configMap", volume["configMap"]["name"], rel


def test_webhook_kubeconfig_points_at_the_served_address_and_path() -> None:
    _, _, s = _webhook()
    server = yaml.safe_load((K3S / "iam-webhook.yaml").read_text())["clusters"][0]["cluster"]["server"]
    host_port, _, path = server.removeprefix("https://").partition("/")
    assert server.startswith("https://") and f"/{path}" == WEBHOOK_PATH
    assert host_port == f"{s.host}:{s.port}"
    assert ipaddress.ip_address(s.host).is_loopback, "host network: the apiserver calls its own node"


def test_webhook_certificates_come_from_the_documented_secrets() -> None:
    w, c, s = _webhook()
    assert _source(w, c, s.tls_cert) == ("secret", "iam-webhook-tls", "tls.crt")
    assert _source(w, c, s.tls_key) == ("secret", "iam-webhook-tls", "tls.key")
    assert _source(w, c, s.client_ca) == ("secret", "iam-webhook-client-ca", "ca.crt")
    for key_file in s.key_files:
        assert _source(w, c, key_file)[:2] == ("configMap", "iam-webhook-keys")


def test_gen_dev_pki_writes_the_kubeconfig_k3s_reads(tmp_path: Path) -> None:
    """`iam-webhook gen-dev-pki --out /etc/k8shost --server-name 127.0.0.1 --url URL` produces the file
    daemonsets/k3s/iam-webhook.yaml describes, and its serving certificate covers the URL's host."""
    shipped = yaml.safe_load((K3S / "iam-webhook.yaml").read_text())
    url = shipped["clusters"][0]["cluster"]["server"]
    argv = ["gen-dev-pki", "--out", str(tmp_path), "--server-name", "127.0.0.1", "--url", url]
    subprocess.run([sys.executable, "-m", "webhook.main", *argv], check=True, capture_output=True, timeout=60)
    made = yaml.safe_load((tmp_path / "iam-webhook.yaml").read_text())

    def files(cfg: Obj) -> list[str]:
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        paths = [cluster["certificate-authority"], user["client-certificate"], user["client-key"]]
        return [Path(p).name for p in paths]

    assert made["clusters"][0]["cluster"]["server"] == url
    assert files(made) == files(shipped) == ["ca.crt", "apiserver-client.crt", "apiserver-client.key"]
    assert Path(shipped["clusters"][0]["cluster"]["certificate-authority"]).parent == Path("/etc/k8shost")
    cert = x509.load_pem_x509_certificate((tmp_path / "server.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
