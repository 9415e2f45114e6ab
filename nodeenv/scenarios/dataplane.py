"""The dataplane against a tenant: a pod refused at OVN's database ports (the platform guard, README
"The platform guard") and a packet claiming another pod's address dropped (OVN port security).

Pods go through the installed `prismnet` executable as in the tenancy part. On a cluster the pod
tries every TCP/SSL remote of the cluster's NB and SB (OVN central's address); on the single node,
whose databases are unix sockets, the node's own address on the NB port. The spoof: an attacker
pod sends raw UDP datagrams with the victim pod's source address to a receiver pod (three nodes on
a cluster, one logical switch), which counts what arrives; the same datagrams with the attacker's
own address arrive, so the path works and only the lie is dropped.
"""

from __future__ import annotations

import json
import subprocess
import sys

from nodeenv.node import read_env_file
from nodeenv.scenario import Place, Scenario

CONNECT = """
import json, socket, sys
out = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1.5).close(); out[target] = "open"
    except OSError as e:
        out[target] = type(e).__name__
print(json.dumps(out))
"""
SPOOF = """
import socket, struct, sys, time
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def csum(b):
    t = sum(struct.unpack("!10H", b)); t = (t >> 16) + (t & 0xFFFF); return ~(t + (t >> 16)) & 0xFFFF
udp = struct.pack("!HHHH", 40000, port, 10, 0) + b"hi"
a, b = socket.inet_aton(src), socket.inet_aton(dst)
hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, a, b)
hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as s:
    for _ in range(5):
        s.sendto(hdr + udp, (dst, 0)); time.sleep(0.05)
"""
RECEIVE = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", int(sys.argv[1]))); s.settimeout(0.3)
print("ready", flush=True); sys.stdin.readline(); seen = []
end = time.monotonic() + 1.0
while time.monotonic() < end:
    try: seen.append(s.recvfrom(64)[1][0])
    except TimeoutError: pass
print(json.dumps(seen))
"""
PORT = 7002


def run(scn: Scenario) -> None:
    attacker, victim, receiver = (scn.at(i) for i in range(3))
    with scn.step("dataplane: a pod cannot open OVN's NB/SB (platform guard)", on=attacker.name) as r:
        pod = _pod(scn, attacker, "dp-attacker")
        targets = _ovsdb_targets(scn, attacker)
        got = json.loads(_in(pod.netns, CONNECT, *targets)) if targets else {}
        if "open" in got.values():
            raise RuntimeError(f"a tenant pod reaches OVN's databases: {got}")
        r.detail = ", ".join(f"{t} {v}" for t, v in got.items()) or "no TCP/SSL OVSDB listener (unix sockets)"
    with scn.step(
        "dataplane: another pod's IP as source is dropped (port security)",
        on=scn.where(attacker, victim, receiver),
    ) as r:
        v, rcv = _pod(scn, victim, "dp-victim"), _pod(scn, receiver, "dp-receiver")
        spoofed, own = _received(rcv, pod, v.ip), _received(rcv, pod, pod.ip)
        if v.ip in spoofed or pod.ip not in own:
            raise RuntimeError(f"spoofed {v.ip}: {spoofed}; own {pod.ip}: {own}")
        r.detail = f"0 of 5 from {v.ip} (spoofed) arrived, {own.count(pod.ip)} of 5 from {pod.ip} (own)"


class _Pod:
    def __init__(self, netns: str, ip: str) -> None:
        self.netns, self.ip = netns, ip


def _pod(scn: Scenario, place: Place, name: str) -> _Pod:
    result = scn.add_pod(place.env, "dp-tenant", name, name, chained=False)
    return _Pod(name, str(result["ips"][0]["address"]).split("/")[0])  # type: ignore[index]


def _ovsdb_targets(scn: Scenario, place: Place) -> list[str]:
    """HOST:PORT of OVN central's NB and SB as the nodes reach them (the cluster's underlay remotes;
    a place's own OVN_NB_DB is the control part's unix socket in the sandbox); on the single node,
    whose databases are unix sockets, the node's address on the NB port."""
    env = read_env_file(scn.cluster.env_file) if scn.cluster is not None else place.env
    keys = ("OVN_NB_DB_SSL", "OVN_SB_DB_SSL", "OVN_NB_DB_TCP", "OVN_SB_DB_TCP", "OVN_NB_DB", "OVN_SB_DB")
    remotes = ",".join(env.get(k, "") for k in keys).split(",")
    out = list(dict.fromkeys(r.split(":", 1)[1] for r in remotes if r.startswith(("tcp:", "ssl:"))))
    node_ip = place.env.get("K8SHOST_NODE_IP", "")
    return out or ([f"{node_ip}:6641"] if node_ip else [])


def _in(netns: str, script: str, *args: str) -> str:
    argv = ["ip", "netns", "exec", netns, sys.executable, "-c", script, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def _received(receiver: _Pod, sender: _Pod, source: str) -> list[str]:
    """The sources of what `receiver` gets while `sender` sends 5 datagrams claiming `source`."""
    argv = ["ip", "netns", "exec", receiver.netns, sys.executable, "-c", RECEIVE, str(PORT)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdout.readline()
        _in(sender.netns, SPOOF, source, receiver.ip, str(PORT))
        out, _ = proc.communicate("go\n", timeout=10)
    finally:
        proc.kill()
    seen: list[str] = json.loads(out.strip().splitlines()[-1])
    return seen
