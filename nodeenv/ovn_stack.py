"""The OVS + OVN daemons a node needs, each with its own database and socket in the run dir.

OVN central (`ovn_central.py`: NB and SB ovsdb-servers and ovn-northd, standalone or RAFT
clusters as `NodeSettings.ovn_central` says), the node's ovsdb-server (Open_vSwitch),
ovs-vswitchd with the integration bridge on the userspace datapath (there is no kernel
datapath on these machines; which ovs-vswitchd: `nodeenv/vswitchd.py`), and ovn-controller bound
to it, given the SB remote list.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

from nodeenv import ovn_tree
from nodeenv.daemons import DaemonError, in_netns, run_checked, start_detaching, wait_for
from nodeenv.node import Node
from nodeenv.ovn_central import (
    NB_SCHEMA,
    SB_SCHEMA,
    Database,
    Member,
    OvnCentral,
    central_dir,
    rundirs,
    start_standalone,
)
from nodeenv.vswitchd import SCHEMA, Vswitchd, choose_vswitchd
from ovnaccess.tls import OvnTls

log = logging.getLogger(__name__)

# The userspace datapath's own tap device: a machine-wide name, so one ovs-vswitchd per machine.
USERSPACE_DATAPATH_DEV = "ovs-netdev"
REQUIRED_TOOLS = (
    "ovsdb-server",
    "ovsdb-tool",
    "ovsdb-client",
    "ovs-appctl",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovn-northd",
    "ovn-controller",
    "ovn-nbctl",
    "ovn-sbctl",
    "ip",
    "ethtool",
)


def link_exists(name: str, netns: str = "") -> bool:
    """Whether network device `name` exists in `netns` ("": this namespace)."""
    if not netns:
        return Path(f"/sys/class/net/{name}").exists()
    return (
        subprocess.run(["ip", "-n", netns, "link", "show", "dev", name], capture_output=True).returncode == 0
    )


def missing_prerequisites() -> list[str]:
    """What a node's daemons need and lack: the OVN tree (`make ovs`), whose bin/ this puts first in
    PATH (ovn_tree.activate), each tool (the ovs*/ovn* ones found in the tree) and the schemas."""
    why = ovn_tree.missing()
    if why:
        return [why]
    ovn_tree.activate()
    missing = []
    for tool in REQUIRED_TOOLS:
        found = shutil.which(tool)
        if found is None:
            missing.append(tool)
        elif tool.startswith("ov") and not ovn_tree.in_tree(found):
            missing.append(f"{tool} from the tree (PATH finds {found} first)")
    missing += [str(s) for s in (ovn_tree.share(SCHEMA), NB_SCHEMA, SB_SCHEMA) if not s.exists()]
    return missing


class OvnStack:
    name = "ovn"

    def start(self, node: Node) -> dict[str, str]:
        require_prerequisites()
        bridge, s = node.settings.bridge, node.settings
        if link_exists(bridge, s.netns):
            raise DaemonError(
                f"a network device named {bridge} already exists: another OVS owns it, or a crashed "
                f"run left it behind (then: ip link del {bridge})"
            )
        ovs_dir = node.path("ovs", "x").parent
        if not link_exists(USERSPACE_DATAPATH_DEV, s.netns):
            (ovs_dir / "datapath-created").touch()
        central = OvnCentral(s.ovn_central).start(node)
        ovs_db, vswitchd = start_switch(node)
        return {**start_controller(node, ovs_db, central["OVN_SB_DB"]), **central, **vswitchd.endpoints()}

    def cleanup(self, node: Node) -> None:
        # ovs-vswitchd leaves the bridge's tap device behind when it is stopped.
        marker = node.run_dir / "ovs" / "bridge-created"
        if not marker.exists() or node.settings.netns:  # a node's own netns takes its devices with it
            return
        bridge = marker.read_text()
        if Path(f"/sys/class/net/{bridge}").exists():
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        # The userspace datapath's tap is persistent; remove it only if this node-up made it.
        if (node.run_dir / "ovs" / "datapath-created").exists():
            subprocess.run(["ip", "link", "del", USERSPACE_DATAPATH_DEV], capture_output=True)


def require_prerequisites() -> None:
    missing = missing_prerequisites()
    if missing:
        raise DaemonError(f"missing prerequisites: {', '.join(missing)} (run `make setup` and `make ovs`)")


def start_switch(node: Node) -> tuple[str, Vswitchd]:
    """The node's ovsdb-server (Open_vSwitch, on the chosen vswitchd's schema) and ovs-vswitchd
    (nodeenv/vswitchd.py picks which), no bridge yet; the OVSDB remote and that vswitchd."""
    env = {**node.process_env(), **rundirs(node.path("ovs", "x").parent)}
    vswitchd = choose_vswitchd()
    ovs_db = start_ovsdb(node, "ovs", vswitchd.schema, env)
    start_vswitchd(node, env, vswitchd)
    return ovs_db, vswitchd


def start_controller(
    node: Node, ovs_db: str, sb_remote: str, tls: OvnTls | None = None, *, registered: bool = True
) -> dict[str, str]:
    """The integration bridge (userspace datapath) and ovn-controller as chassis `system_id`,
    encapsulating Geneve from `encap_ip`, given the SB remote list (and, for `ssl:` remotes, its
    own key and certificate); waits for its Chassis row unless `registered` is False (a reinstalled
    node's chassis registers only once node-controller removed its stale one)."""
    flags = tls.ctl_flags() if tls else []
    bridge, s = node.settings.bridge, node.settings
    ovs_dir = node.path("ovs", "x").parent
    env = {**node.process_env(), **rundirs(ovs_dir)}
    run_checked(
        [
            "ovs-vsctl",
            f"--db={ovs_db}",
            "--timeout=10",
            "--may-exist",
            "add-br",
            bridge,
            "--",
            "set",
            "Bridge",
            bridge,
            "datapath_type=netdev",
            "fail_mode=secure",
            "other_config:disable-in-band=true",
            "--",
            "set",
            "Open_vSwitch",
            ".",
            f"external_ids:system-id={s.system_id}",
            f"external_ids:ovn-remote={sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            f"external_ids:ovn-encap-ip={s.encap_ip}",
            f"external_ids:ovn-bridge={bridge}",
            "external_ids:ovn-bridge-datapath-type=netdev",
            # the whole southbound database, not per-datapath conditions (as ovn-kubernetes
            # does): no monitor-condition round trip before a new pod's port can be bound
            "external_ids:ovn-monitor-all=true",
        ],
        env,
    )
    (ovs_dir / "bridge-created").write_text(bridge)
    wait_for_bridge(bridge, ovs_dir / "ovs-vswitchd.log", s.netns)
    # ovn-controller has no --unixctl in OVN 23.03; OVN_RUNDIR places its control socket.
    start_detaching(
        "ovn-controller",
        controller_argv(ovs_db, ovs_dir, tls),
        ovs_dir / "ovn-controller.pid",
        env,
        node.daemons,
        s.netns,
    )
    sbctl = in_netns(s.netns, ["ovn-sbctl", f"--db={sb_remote}", *flags, "--timeout=10"])
    if registered:
        wait_for(
            lambda: s.system_id in _quiet([*sbctl, "--bare", "--columns=name", "list", "Chassis"]),
            "ovn-controller to register its chassis",
        )
    return {"OVS_DB": ovs_db, "OVS_BRIDGE": bridge, "OVN_CHASSIS": s.system_id, **rundirs(ovs_dir)}


def controller_argv(ovs_db: str, ovs_dir: Path, tls: OvnTls | None) -> list[str]:
    """ovn-controller on the node's OVS database, with its certificate for an `ssl:` SB."""
    flags = tls.ctl_flags() if tls else []
    return ["ovn-controller", ovs_db, *flags, f"--log-file={ovs_dir / 'ovn-controller.log'}"]


def start_ovsdb(node: Node, db: str, schema: Path, env: dict[str, str]) -> str:
    """ovsdb-server for one database (`ovs`, `nb`, `sb`) on <ovs dir>/<db>.sock; returns its remote."""
    name = {"ovs": "Open_vSwitch", "nb": "OVN_Northbound", "sb": "OVN_Southbound"}[db]
    return start_standalone(node, Member(Database(db, name, schema), 0, central_dir(node)), env)


def start_vswitchd(node: Node, env: dict[str, str], vswitchd: Vswitchd) -> dict[str, str]:
    """`vswitchd` on the node's Open_vSwitch database (initialised here, made from `vswitchd.schema`
    by start_ovsdb); no bridge yet."""
    ovs_dir = node.path("ovs", "x").parent
    log.info("ovs-vswitchd %s: %s (schema %s)", vswitchd.version, vswitchd.binary, vswitchd.schema)
    ovs_db = f"unix:{ovs_dir / 'ovs.sock'}"
    run_checked(["ovs-vsctl", f"--db={ovs_db}", "--timeout=10", "--no-wait", "init"], env)
    start_detaching(
        "ovs-vswitchd",
        [
            str(vswitchd.binary),
            ovs_db,
            f"--unixctl={ovs_dir / 'ovs-vswitchd.ctl'}",
            f"--log-file={ovs_dir / 'ovs-vswitchd.log'}",
        ],
        ovs_dir / "ovs-vswitchd.pid",
        env,
        node.daemons,
        node.settings.netns,
    )
    return rundirs(ovs_dir)


def wait_for_bridge(bridge: str, vswitchd_log: Path, netns: str, timeout: float = 10.0) -> None:
    """ovs-vswitchd creates the bridge's tap asynchronously; fail clearly when it cannot."""
    deadline = time.monotonic() + timeout
    while not link_exists(bridge, netns):
        text = vswitchd_log.read_text(errors="replace") if vswitchd_log.exists() else ""
        if f"{USERSPACE_DATAPATH_DEV}: creating tap device failed: Device or resource busy" in text:
            raise DaemonError(
                "another ovs-vswitchd with the userspace datapath runs on this machine and holds "
                f"{USERSPACE_DATAPATH_DEV}; only one can: stop it first (make node-down, or the test "
                "session that started it)"
            )
        if time.monotonic() > deadline:
            raise DaemonError(f"ovs-vswitchd did not create {bridge}; see {vswitchd_log}")
        time.sleep(0.02 if not netns else 0.05)


def _quiet(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""
