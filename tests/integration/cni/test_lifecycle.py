"""DEL idempotence, concurrency, CHECK drift, GC after an agent crash, STATUS, metrics."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nodeenv.daemons import is_alive
from tests.integration.cni.conftest import Agent, Pods, ping, pod_ip


def _lsps(agent: Agent) -> set[str]:
    return set(agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split())


def _pod_ports(agent: Agent) -> set[str]:
    out = agent.vsctl(
        "--bare", "--columns=name", "find", "Interface", "external_ids:prismnet.network=prismnet"
    )
    return set(out.split())


def _pod_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if "prismnet:" in line}


def test_del_twice_and_del_after_netns_is_gone(agent: Agent, pods: Pods) -> None:
    name, cid, result = pods.add("deltest", "p")
    args = "K8S_POD_NAMESPACE=deltest;K8S_POD_NAME=p"
    rt = agent.runtime()
    subprocess.run(["ip", "netns", "del", name], check=True)
    assert not os.path.exists(f"/run/netns/{name}")
    first = rt.delete(cid, f"/run/netns/{name}", result, args=args)
    assert first.rc == 0, first.out
    assert not os.path.exists(f"/run/netns/{name}"), "DEL must never re-create the netns"
    second = rt.delete(cid, f"/run/netns/{name}", result, args=args)
    assert second.rc == 0, second.out
    assert f"p-{cid}" not in _lsps(agent)
    assert result["interfaces"][0]["name"] not in _pod_links()


def test_del_without_add_and_without_netns_succeeds(agent: Agent) -> None:
    call = agent.runtime().delete(
        "neverseen000000000000", "", None, args="K8S_POD_NAMESPACE=x;K8S_POD_NAME=y"
    )
    assert call.rc == 0, call.out


def test_add_retried_with_same_container_id_keeps_one_port(agent: Agent, pods: Pods) -> None:
    name, cid, _ = pods.add("retry", "r")
    args = "K8S_POD_NAMESPACE=retry;K8S_POD_NAME=r"
    again = agent.runtime().add(cid, f"/run/netns/{name}", args=args)
    assert again.rc == 0, again.out
    pods.created[-1] = (name, cid, args, again.out)
    assert [n for n in _lsps(agent) if cid in n] == [f"r-{cid}"]
    out = subprocess.run(
        ["ip", "-n", name, "-o", "-4", "addr", "show", "eth0"], capture_output=True, text=True
    )
    assert out.stdout.count("inet ") == 1 and pod_ip(again.out) in out.stdout


def test_fifty_concurrent_adds_get_distinct_addresses(agent: Agent, pods: Pods) -> None:
    netns = [pods.netns() for _ in range(50)]
    rt = agent.runtime()

    def add(i: int) -> tuple[int, dict[str, object]]:
        name, path = netns[i]
        cid = f"conc{os.getpid()}x{i:03d}" + "0" * 16
        args = f"K8S_POD_NAMESPACE=conc;K8S_POD_NAME=p{i}"
        call = rt.add(cid, path, args=args)
        pods.created[i] = (name, cid, args, call.out)
        return call.rc, call.out

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(add, range(50)))
    assert [rc for rc, _ in results] == [0] * 50, [out for rc, out in results if rc]
    ips = [pod_ip(out) for _, out in results]
    assert len(set(ips)) == 50
    nb_ips = agent.nbctl(
        "--bare", "--columns=addresses", "find", "Logical_Switch_Port", "external_ids:prismnet.namespace=conc"
    ).split()
    assert sorted(x for x in nb_ips if x.count(".") == 3) == sorted(ips)


def test_check_reports_drift_precisely(agent: Agent, pods: Pods) -> None:
    name, cid, result = pods.add("drift", "d")
    args = "K8S_POD_NAMESPACE=drift;K8S_POD_NAME=d"
    subprocess.run(["ip", "-n", name, "addr", "flush", "dev", "eth0"], check=True)
    call = agent.runtime().check(cid, f"/run/netns/{name}", result, args=args)
    assert call.rc == 1 and call.out["code"] == 101
    assert f"lacks address {result['ips'][0]['address']}" in str(call.out["msg"])


def test_agent_killed_mid_adds_then_gc_leaves_nothing(agent: Agent, pods: Pods) -> None:
    netns = [pods.netns() for _ in range(12)]
    rt = agent.runtime()
    done: list[tuple[str, str]] = []

    def add(i: int) -> None:
        name, path = netns[i]
        cid = f"gc{os.getpid()}x{i:03d}" + "0" * 16
        args = f"K8S_POD_NAMESPACE=gcns;K8S_POD_NAME=g{i}"
        call = rt.add(cid, path, args=args)
        pods.created[i] = (name, cid, args, call.out)
        if call.rc == 0:
            done.append((cid, "eth0"))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while not done:  # kill the agent once some ADDs completed and others are in flight
        assert time.monotonic() < deadline, "no ADD completed"
        time.sleep(0.002)
    agent.kill()
    for t in threads:
        t.join()
    agent.restart()
    valid = done[: len(done) // 2]
    conf = {
        **agent.conflist["plugins"][0],
        "name": "prismnet",
        "cniVersion": "1.1.0",
        "cni.dev/valid-attachments": [{"containerID": c, "ifname": i} for c, i in valid],
    }
    call = rt.exec("prismnet", {"CNI_COMMAND": "GC"}, conf)
    assert call.rc == 0, call.out
    ours = {c for c, _ in valid}
    gc_lsps = {n for n in _lsps(agent) if f"gc{os.getpid()}x" in n}
    assert {n.split("-", 1)[1] for n in gc_lsps} == ours
    ports = {p for p in _pod_ports(agent)}
    kept_ifaces = {out["interfaces"][0]["name"] for _, c, _, out in pods.created if c in ours}
    assert kept_ifaces <= ports and len(kept_ifaces) == len(ours)
    gc_ports = {p for p in ports if p not in kept_ifaces and _is_gc_port(agent, p)}
    assert gc_ports == set()
    assert all(n in kept_ifaces for n in _pod_links() if _is_gc_link(n, pods))


def _is_gc_port(agent: Agent, port: str) -> bool:
    return f"gc{os.getpid()}x" in agent.vsctl("get", "Interface", port, "external_ids")


def _is_gc_link(name: str, pods: Pods) -> bool:
    out = subprocess.run(["ip", "-d", "link", "show", name], capture_output=True, text=True).stdout
    return f"gc{os.getpid()}x" in out


def test_status_and_metrics(agent: Agent, pods: Pods) -> None:
    pods.add("metrics", "m")
    conf = {**agent.conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.1.0"}
    call = agent.runtime().exec("prismnet", {"CNI_COMMAND": "STATUS"}, conf)
    assert call.rc == 0 and call.out == {}
    text = urllib.request.urlopen(agent.env["PRISMNET_METRICS"], timeout=5).read().decode()
    assert 'prismnet_cni_requests_total{code="0",command="ADD"}' in text
    assert 'prismnet_cni_request_duration_seconds_bucket{command="ADD"' in text
    used = re.findall(r'^prismnet_ipam_subnet_addresses\{state="used",subnet="[^"]+"\} (\S+)$', text, re.M)
    assert used and sum(float(v) for v in used) >= 2  # the pod's address and its subnet's gateway
    assert re.search(r'^ovsdb_client_connected\{database="OVN_Northbound"\} 1\.0$', text, re.M)
    assert re.search(
        r'^ovsdb_client_transaction_duration_seconds_count\{database="Open_vSwitch"\} [1-9]', text, re.M
    )


def test_sigterm_lets_in_flight_requests_finish(agent: Agent, pods: Pods, tmp_path) -> None:
    slow = tmp_path / "bin" / "slow-ipam"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nsleep 1\nexec /usr/lib/cni/host-local\n")
    slow.chmod(0o755)
    conflist = {
        **agent.conflist,
        "plugins": [
            {
                **agent.conflist["plugins"][0],
                "ipam": {"type": "slow-ipam", "subnet": "10.96.7.0/24", "dataDir": str(tmp_path / "hl")},
            }
        ],
    }
    rt = agent.runtime(conflist)
    rt.cni_path.insert(0, str(slow.parent))
    _, path = pods.netns()
    cid = f"term{os.getpid()}" + "0" * 16
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=term;K8S_POD_NAME=t"
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(rt.add(cid, path, args=args)))
    t.start()
    log = Path(agent.node.run_dir / "prismnet" / "agent.log")
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", str(slow)], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the ADD never reached the IPAM plugin"
        time.sleep(0.01)
    (rec,) = [r for r in agent.node.daemons.load() if r.name == "prismnet-agent"]
    os.kill(rec.pid, signal.SIGTERM)
    t.join(30)
    call = result[0]
    try:
        assert call.rc == 0, call.out  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while is_alive(rec):
            assert time.monotonic() < deadline, "agent did not exit after SIGTERM"
            time.sleep(0.02)
        assert "prismnet-agent stopped" in log.read_text()
    finally:
        agent.restart()
        rt.delete(cid, path, call.out, args=args)  # type: ignore[attr-defined]


def test_agent_restart_recreates_a_deleted_management_device(agent: Agent, pods: Pods) -> None:
    """node-down (or an admin) deletes the management device but OVSDB keeps its port: the next
    agent must re-add the port so ovs-vswitchd makes the tap again, and the node reaches pods."""
    dev = agent.component.settings(agent.node).management_if
    agent.stop()
    subprocess.run(["ip", "link", "del", dev], check=True)
    assert dev in agent.vsctl("--bare", "--columns=name", "list", "Interface").split()
    agent.restart()
    assert Path(f"/sys/class/net/{dev}").exists()
    _, _, result = pods.add("mgmtdev", "p")
    ping(None, pod_ip(result))
