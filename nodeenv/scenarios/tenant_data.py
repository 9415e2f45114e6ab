"""A tenant's data-path escapes refused in the sandbox (issue 31 items 3 and 4):
- LoadBalancer IPs: a tenant who can patch services/status (kubectl patch --subresource=status)
  writes another tenant's external IP, then a platform address, into its Service's status;
  fiberlb-controller rewrites the status to its own allocation and OVN never answers the forged VIP
  for that Service. The same allow-shared-ip key in another namespace gets its own IP.
- FlashDNS: from the DNS scenario's pod, a 4,096-byte EDNS query for a 150-address headless Service
  gets at most the 1,232 bytes advertised with TC set and dig retries over TCP; ANY gets one record.
- CSI: kubelet's Node calls naming another volume's device in publish_context (what a forged
  VolumeAttachment status carries; the lightningstor backend of a cluster), a `bind` mount flag, and
  a staging path outside kubelet's directory are refused with the CSI spec's codes; nothing is mounted.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from nodeenv.daemons import run_checked
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.csi import CAP, GIB, Csi
from nodeenv.scenarios.fiberlb import HTTP, _address, _apply, _kubectl, _until
from nodeenv.scenarios.flashdns import DOMAIN_KEY
from nodeenv.scenarios.flashdns import POD as DNS_POD
from protos import csi_pb2

VICTIM_NS, FORGER_NS = "sbx-td-victim", "sbx-td-forger"
PLATFORM_IP = "10.96.0.10"
"""The cluster DNS Service IP: an address of the platform, in no external pool."""
SHARE = {"fiberlb.plasmacloud.io/allow-shared-ip": "guessable"}


def run(scn: Scenario) -> None:
    _forged_lb_ip(scn)
    _no_amplification(scn)
    _forged_device(scn)


def _no_amplification(scn: Scenario) -> None:
    env, place = scn.env, scn.at(2)
    ns, big = FORGER_NS, f"big.{FORGER_NS}.svc.{place.env[DOMAIN_KEY]}"
    scn.defer(_deleter(env, "endpointslice", "big-1", "-n", ns))
    scn.defer(_deleter(env, "service", "big", "-n", ns))
    with scn.step("tenant data: a headless Service with 150 endpoints"):
        spec = {"clusterIP": "None", "selector": {"app": "big"}, "ports": [HTTP]}
        _apply(env, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "big", "namespace": ns},
                     "spec": spec})  # fmt: skip
        eps = [
            {"addresses": [f"10.251.{i // 200}.{i % 200 + 1}"], "conditions": {"ready": True}}
            for i in range(150)
        ]
        meta = {"name": "big-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "big"}}
        ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
        _apply(env, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                     "metadata": meta, "endpoints": eps, "ports": ports})  # fmt: skip
        _until(lambda: _a_records(_dig(place, "+tcp", big)) >= 150, bool, f"{big} has 150 A records")
    with scn.step("tenant data: a 4,096-byte EDNS query gets <= 1,232 bytes + TC, dig retries over TCP",
                  on=place.name):  # fmt: skip
        udp = _dig(place, "+bufsize=4096", "+ignore", big)
        size = int(udp.rsplit("MSG SIZE  rcvd: ", 1)[-1].split()[0]) if "MSG SIZE" in udp else -1
        if not 0 < size <= 1232 or " tc" not in udp.split("flags:", 1)[-1].split(";", 1)[0]:
            raise RuntimeError(f"UDP answer of {size} bytes, flags {udp.split('flags:', 1)[-1][:40]!r}")
        retried = _dig(place, "+bufsize=4096", big)
        if "retrying in TCP mode" not in retried or _a_records(retried) < 150:
            raise RuntimeError("dig did not get the whole answer over TCP")
    with scn.step("tenant data: ANY is answered minimally (RFC 8482)", on=place.name):
        answers = [line for line in _dig(place, "+bufsize=4096", big, "ANY").splitlines()
                   if line.startswith(big)]  # fmt: skip
        if len(answers) != 1 or "HINFO" not in answers[0]:
            raise RuntimeError(f"ANY answered {answers}")


def _a_records(dig_output: str) -> int:
    return len(re.findall(r"\sIN\s+A\s+10\.251\.", dig_output))


def _dig(place: Place, *args: str) -> str:
    """dig from the DNS scenario's pod to its node's FlashDNS listener."""
    dns = f"@{place.env['CLUSTER_DNS_IP']}"
    argv = ["ip", "netns", "exec", DNS_POD, "dig", dns, "+time=2", "+tries=1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout


def _service(name: str, ns: str, port: int) -> dict[str, Any]:
    spec = {"type": "LoadBalancer", "selector": {"app": name}, "ports": [{**HTTP, "port": port}]}
    meta = {"name": name, "namespace": ns, "annotations": SHARE}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def _forged_lb_ip(scn: Scenario) -> None:
    env = scn.env
    for ns in (VICTIM_NS, FORGER_NS):  # cleanups run last-in first: the Services go first
        scn.defer(_deleter(env, "namespace", ns))
    for name, ns in (("victim", VICTIM_NS), ("forger", FORGER_NS)):
        scn.defer(_deleter(env, "service", name, "-n", ns))
    with scn.step("tenant data: two tenants' LoadBalancer Services, the same allow-shared-ip key"):
        for ns in (VICTIM_NS, FORGER_NS):
            _apply(env, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        _apply(env, _service("victim", VICTIM_NS, 80))
        _apply(env, _service("forger", FORGER_NS, 443))  # disjoint ports: would share if keys matched
        victim = _until(lambda: _address(env, "victim", "LoadBalancer", VICTIM_NS), bool, "victim IP")
        own = _until(lambda: _address(env, "forger", "LoadBalancer", FORGER_NS), bool, "forger IP")
        if own == victim:
            raise RuntimeError(f"a guessed sharing key in another namespace shares {victim}")
    for forged, whose in ((victim, "another tenant's"), (PLATFORM_IP, "the platform's")):
        with scn.step(f"tenant data: {whose} IP forged into services/status -> rewritten, not programmed"):
            patch = {"status": {"loadBalancer": {"ingress": [{"ip": forged}]}}}
            _kubectl(env, "-n", FORGER_NS, "patch", "service", "forger", "--subresource=status",
                     "--type=merge", "-p", json.dumps(patch))  # fmt: skip
            got = _until(lambda: _address(env, "forger", "LoadBalancer", FORGER_NS), lambda ip: ip == own,
                         "status rewritten to the controller's own allocation")  # fmt: skip
            vips = _forger_vips(env)
            if forged in vips or own not in vips:
                raise RuntimeError(f"OVN answers {sorted(vips)} for the forger (forged {forged}, own {got})")


def _deleter(env: dict[str, str], *what: str) -> Callable[[], object]:
    return lambda: _kubectl(env, "delete", *what, "--wait=false", check=False)


def _forger_vips(env: dict[str, str]) -> set[str]:
    """Addresses OVN's rows of the forger's Service answer on (their `vips` keys)."""
    out = run_checked(["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--format=json", "--columns=name,vips",
                       "list", "Load_Balancer"])  # fmt: skip
    doc = json.loads(out)
    vips: set[str] = set()
    for name, column in doc["data"]:
        if str(name).startswith(f"fiberlb:{FORGER_NS}/forger:"):
            vips.update(key.rsplit(":", 1)[0] for key, _ in column[1])
    return vips


def _forged_device(scn: Scenario) -> None:
    place = scn.at(0)
    csi = Csi(place.env)
    c = csi.controller
    remote = "LIGHTNINGSTOR_ENDPOINT" in place.env
    ids: list[str] = []

    def cleanup() -> None:
        for vid in ids:
            c.ControllerUnpublishVolume(
                csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vid, node_id=csi.node_id)
            )
            c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vid))

    scn.defer(cleanup)
    with scn.step("tenant data: two volumes published to the node", on=place.name):
        ctxs = []
        for name in ("sbx-td-mine", "sbx-td-theirs"):
            size = csi_pb2.CapacityRange(required_bytes=GIB)
            req = csi_pb2.CreateVolumeRequest(name=name, capacity_range=size, volume_capabilities=[CAP],
                                              parameters={"type": "ssd", "replication": "1"})  # fmt: skip
            vid = c.CreateVolume(req).volume.volume_id
            ids.append(vid)
            pub = csi_pb2.ControllerPublishVolumeRequest(
                volume_id=vid, node_id=csi.node_id, volume_capability=CAP
            )
            ctxs.append(dict(c.ControllerPublishVolume(pub).publish_context))
    mine, ctx = ids[0], ctxs[0]
    staging, _ = csi.paths(mine)
    if remote:
        with scn.step("tenant data: a publish_context naming another volume's device mounts nothing",
                      on=place.name):  # fmt: skip
            forged = {**ctx, "device_path": ctxs[1]["device_path"]}
            _refused(csi, mine, staging, forged, CAP, grpc.StatusCode.FAILED_PRECONDITION)
    bind = csi_pb2.VolumeCapability()
    bind.CopyFrom(CAP)
    bind.mount.mount_flags.append("bind")
    with scn.step(
        "tenant data: a `bind` mount flag and a path outside kubelet's dir are refused", on=place.name
    ):
        _refused(csi, mine, staging, ctx, bind, grpc.StatusCode.INVALID_ARGUMENT)
        _refused(csi, mine, "/etc/sbx-td-staging", ctx, CAP, grpc.StatusCode.INVALID_ARGUMENT)


def _refused(
    csi: Csi, volume_id: str, staging: str, ctx: dict[str, str], cap: Any, code: grpc.StatusCode
) -> None:
    req = csi_pb2.NodeStageVolumeRequest(volume_id=volume_id, staging_target_path=staging,
                                         volume_capability=cap, publish_context=ctx)  # fmt: skip
    try:
        csi.node.NodeStageVolume(req)
    except grpc.RpcError as e:
        if e.code() != code:
            raise RuntimeError(
                f"NodeStageVolume answered {e.code().name}, not {code.name}: {e.details()}"
            ) from e
    else:
        raise RuntimeError(f"NodeStageVolume accepted what it must refuse with {code.name}")
    mounts = Path("/proc/self/mountinfo").read_text()
    if f" {staging} " in mounts:
        raise RuntimeError(f"{staging} was mounted")
