"""`make sandbox` as a newcomer runs it (issue 18 item 9): `k8shost-node sandbox` brings up its own
3-node cluster (its own run dir and prefix, beside the session's cluster), runs every part of the
scenario on it, each step naming the node(s) it ran on, and takes everything down again.

The scenario's parts are also tested one by one on the single-node fixtures (their own tests); this
is the whole scenario on a cluster: pods of one project on different nodes, a LoadBalancer whose
backends are on every node, the database pod's volume moved from node1 to node2 through each node's
own CSI plugin, cross-project traffic refused across nodes, and a node killed, its backend dropped
and its state released by the node-controller.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from csi import loopdev
from nodeenv.cli import main
from nodeenv.cluster.underlay import list_netns
from nodeenv.runtime_dir import short_path
from nodeenv.scenarios import SCENARIOS
from tests.conftest import require_ovn

PREFIX = "k8shx"


def _rows(out: str) -> dict[str, tuple[str, str]]:
    """step -> (node column, result) from the printed table."""
    lines = out.splitlines()
    header = next(
        i for i, line in enumerate(lines) if line.startswith("step ") and line.rstrip().endswith("time")
    )
    node_at, result_at = lines[header].index("node"), lines[header].index("result")
    rows = {}
    for line in lines[header + 2 :]:
        if line.startswith("sandbox ("):
            break
        if line[:node_at].strip():
            rows[line[:node_at].strip()] = (line[node_at:result_at].strip(), line[result_at:].split()[0])
    return rows


@pytest.mark.timeout(1200)  # the whole scenario (cold restart, rejoin, node failure): ~6-8 min
def test_make_sandbox_runs_the_scenario_on_three_nodes(
    short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_ovn()
    run_dir = short_tmp / "sandbox"
    rc = main(["sandbox", "--sandbox-dir", str(run_dir), "--sandbox-prefix", PREFIX])
    out = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + out)
    assert rc == 0, out
    assert "sandbox (3 nodes): PASSED" in out
    rows = _rows(out)
    assert all(result == "ok" for _, result in rows.values()), rows
    every = "node1,node2,node3"
    assert rows["cluster-up: 3 nodes, OVN central, API double, LightningStor, controllers"][0] == every
    assert rows["ovn: netns ping each other"][0] == "node1,node2"  # across Geneve
    assert rows["ovn programs: every OVN/OVS daemon runs the tree's programs"][0] == every
    assert "daemons from build/ovn-trixie; ovn-controller 25.03." in out and "ovs-vswitchd 3.5." in out
    assert rows["socket paths: every node's sockets below its run dir's alias, answering"][0] == every
    assert rows["cni: pods ping each other (same and other namespace)"][0] == every
    assert rows["ovn tls: NB client without a certificate refused"][0] == "node1"
    assert rows["podman: container and a CNI pod ping each other"][0] == "node2,node3"
    assert rows["e2e: while on node1, node2 is refused the volume (FAILED_PRECONDITION)"][0] == "node2"
    assert rows["e2e: database pod deleted on node1, started on node2: the data is there"][0] == "node1,node2"
    assert rows["flashdns: Service by short name (getent, search path)"][0] == "node3"
    assert rows["fiberlb: 3 CNI pods serving HTTP + a client pod"][0] == every
    assert rows["tenancy: traffic allowed inside a project"][0] == "node2,node1"
    assert rows["tenancy: traffic refused across projects"][0] == "node3,node1"
    assert rows["node failure: node3 killed; pods on node1,node2 still reach each other"][0] == "node1,node2"
    assert rows["plasmacloud: a call without a token refused"][0] == "control"
    assert rows["monitoring: flashdns-controller resumed (SIGCONT), FlashdnsDown resolves"][0] == "node3"
    assert "released" in out and "the invariants hold" in out
    for part in SCENARIOS:  # every part put steps in the table
        prefix = part.__name__.rsplit(".", 1)[1].replace("_", " ").replace("spec times", "spec")
        prefix = {"ovn alive": "ovn", "e2e volume": "e2e"}.get(prefix, prefix)
        assert any(name.startswith(f"{prefix}:") for name in rows), f"no step of {part.__name__}"
    assert rows["cluster-down"][0] == every

    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    left = list_netns(PREFIX) + [ns for ns in netns if ns.startswith(("sbx-", "tenant-"))]
    left += [p for p in ("/etc/netns/sbx-dns-client",) if Path(p).exists()]
    alias = short_path(run_dir)  # the daemons' paths are below it
    left += [str(p) for p in (run_dir, alias) if p.exists() or p.is_symlink()]
    left += list(loopdev.backed_by_dir(short_tmp, leaving=False))
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    left += [line for line in ps.splitlines() if str(run_dir) in line or str(alias) in line]
    assert not left, f"the sandbox left behind: {left}"
