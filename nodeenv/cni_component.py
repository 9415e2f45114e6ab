"""The PrismNET CNI in the node environment: the `prismnet` executable, its conflist, the agent.

start(): installs `<install_root>/opt/cni/bin/prismnet` (a two-line launcher run as
`python -IS` of the system interpreter when it can, see `shim_interpreter`), writes
`<install_root>/etc/cni/net.d/10-prismnet.conflist` naming this node's OVN and the agent's
socket (`agentSocket`; both through `cni.install`, as the DaemonSet's installer), starts
`prismnet-agent` against the node's OVS/OVN and waits for its socket.
cleanup(): removes exactly the files it installed (recorded in the run dir) and what the
agent created in the kernel (management port device, masquerade rule).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cni.install import CONFLIST_NAME, install
from cni.management import teardown_host
from cni.settings import AgentSettings
from common.plasmacloud_grpc import PlasmaCloudAuth
from nodeenv.daemons import DaemonError, free_port, in_netns, start_foreground, unix_listening, wait_for
from nodeenv.flashdns_component import CLUSTER_DNS_IP, CLUSTER_DOMAIN
from nodeenv.node import Node
from nodeenv.ovn_pki import tls_env

REPO = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"


def shim_interpreter(candidate: str = SYSTEM_PYTHON) -> str:
    """The interpreter the installed `prismnet` runs on: the system Python 3.11+ if there is one.

    kubelet pays its start-up on every CNI call. Debian's python3 is linked statically with
    PGO/LTO and starts ~1.5 ms (15%) sooner here than a shared-library build such as the
    venv's (`python -IS -c pass`, 8.6 vs 9.7 ms median); the shim needs only the stdlib.
    """
    try:
        probe = subprocess.run(
            [candidate, "-IS", "-c", "import sys; print(sys.version_info >= (3, 11))"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return sys.executable
    return candidate if probe.stdout.strip() == "True" else sys.executable


@dataclass
class CniComponent:
    name: str = "prismnet-cni"
    cluster_cidr: str = "10.244.0.0/16"
    metrics_port: int = 0
    """0: pick a free port."""
    dns_servers: str = CLUSTER_DNS_IP
    """Nameservers for the pods' `dns` block: the cluster DNS (see flashdns_component)."""
    cluster_domain: str = CLUSTER_DOMAIN
    """Pods search `<ns>.svc.<domain> svc.<domain> <domain>` with ndots:5 ('' = no search path)."""
    plasmacloud: PlasmaCloudAuth | None = None
    """CA and IAM token file for PrismNET IPAM (`prismnetEndpoint` netconfs); None: refused."""
    kubeconfig: str = ""
    """For the agent's PolicyDenied Events ('' = the node's KUBECONFIG, if any)."""
    node_name: str = ""
    """The node's Kubernetes name ('' = the agent takes its OVS system-id)."""

    def settings(self, node: Node) -> AgentSettings:
        e = node.endpoints
        return AgentSettings(
            socket=node.run_dir / "prismnet" / "cni.sock",
            ovs_db=e["OVS_DB"],
            ovn_nb_db=e["OVN_NB_DB"],
            bridge=e.get("OVS_BRIDGE", node.settings.bridge),
            cluster_cidr=self.cluster_cidr,
            metrics_address=f"127.0.0.1:{self.metrics_port or free_port()}",
            dns_servers=self.dns_servers,
            cluster_domain=self.cluster_domain,
        )

    def start(self, node: Node) -> dict[str, str]:
        s = self.settings(node)
        exe, conflist = self._install(node, s)
        argv = [sys.executable, "-m", "cni.daemon.main", "--socket", str(s.socket), "--ovs-db", s.ovs_db,
                "--ovn-nb-db", s.ovn_nb_db, "--bridge", s.bridge, "--cluster-cidr", s.cluster_cidr,
                "--metrics-address", s.metrics_address, "--dns-servers", s.dns_servers,
                "--cluster-domain", s.cluster_domain, "--ovn-rundir", str(node.run_dir / "ovs"),
                "--acl-log-file", str(node.path("ovs", "ovn-controller.log"))]  # fmt: skip
        kubeconfig = self.kubeconfig or node.endpoints.get("KUBECONFIG", "")
        if kubeconfig:  # drops as Events in their namespace (the API double's admin here)
            argv += ["--events-kubeconfig", kubeconfig]
        if self.node_name:
            argv += ["--node-name", self.node_name]
        if self.plasmacloud is not None:
            argv += ["--plasmacloud-ca", str(self.plasmacloud.ca),
                     "--plasmacloud-token-file", str(self.plasmacloud.token_file)]  # fmt: skip
        # the agent gets its whole configuration from argv, never from stray PRISMNET_* variables
        # (node.env's own PRISMNET_* entries are for people and tools, not for the agent)
        env = {k: v for k, v in node.process_env().items() if not k.startswith("PRISMNET_")}
        env["PYTHONPATH"] = str(REPO)
        env |= tls_env(node.endpoints, "prismnet-agent", node.settings.system_id)  # its own OVN certificate
        s.socket.unlink(missing_ok=True)  # a killed agent leaves its socket behind
        log = node.path("prismnet", "agent.log")
        _, proc = start_foreground("prismnet-agent", argv, log, env, node.daemons, node.settings.netns)
        try:
            wait_for(
                lambda: unix_listening(s.socket),
                "prismnet-agent to listen on its socket",
                timeout=30,
                proc=proc,
            )
        except DaemonError as e:  # it waits for what is missing instead of exiting: say what that is
            raise DaemonError(f"{e}; its /readyz: {_readyz(s.metrics_address)} (log {log})") from None
        return {
            **({"PRISMNET_EVENTS_KUBECONFIG": kubeconfig} if kubeconfig else {}),
            "PRISMNET_AGENT_SOCKET": str(s.socket),
            "PRISMNET_CNI_BIN": str(exe),
            "PRISMNET_CNI_CONFLIST": str(conflist),
            "PRISMNET_METRICS": f"http://{s.metrics_address}/metrics",
            "PRISMNET_CLUSTER_CIDR": s.cluster_cidr,
        }

    def _install(self, node: Node, s: AgentSettings) -> tuple[Path, Path]:
        """The executable and conflist under install_root; what did not exist is recorded for cleanup."""
        root = node.settings.install_root
        exe = root / "opt" / "cni" / "bin" / "prismnet"
        conflist = root / "etc" / "cni" / "net.d" / CONFLIST_NAME
        installed = node.path("prismnet", "installed.json")
        before = json.loads(installed.read_text()) if installed.exists() else []  # a restart
        created = [str(p) for p in (exe, conflist) if not p.exists()]
        created += [str(d) for d in _missing_dirs(exe.parent) + _missing_dirs(conflist.parent)]
        merged = [p for p in before if p not in created] + created
        # removal order: deepest first, so a directory comes after what it contains
        installed.write_text(json.dumps(sorted(merged, key=lambda p: -len(Path(p).parts))))
        done = install(root, s, shim_interpreter(), REPO)  # the conflist names s.socket (agentSocket)
        return done.executable, done.conflist

    def cleanup(self, node: Node) -> None:
        installed = node.run_dir / "prismnet" / "installed.json"
        if installed.exists():
            for path in map(Path, json.loads(installed.read_text())):
                if path.is_dir():
                    if not any(path.iterdir()):
                        path.rmdir()
                else:
                    path.unlink(missing_ok=True)
        # a cluster node's management port and masquerade rule go with its network namespace; the
        # names are the same in every node, so they must never be looked up from here
        if "OVS_DB" in node.endpoints and not node.settings.netns:
            teardown_host(self.settings(node))


def _missing_dirs(path: Path) -> list[Path]:
    """The directories `mkdir -p path` would create, deepest first."""
    out = []
    while not path.exists():
        out.append(path)
        path = path.parent
    return out


@dataclass(frozen=True)
class CniCall:
    rc: int
    out: dict[str, object]
    stderr: str
    plugin_ms: tuple[float, ...] = ()
    """Wall time of each plugin executed for this call, in the order run (for the bench)."""


class CniRuntime:
    """What containerd's libcni does with a conflist: run each plugin with the CNI env + netconf.

    Used by the sandbox scenario, the integration tests and the benchmark to drive the real
    executables exactly as a runtime does (name/cniVersion injected, prevResult chained,
    runtimeConfig only for declared capabilities, DEL in reverse order). On a cluster node
    (`netns`) the plugins run in the node's network namespace, where its runtime runs.
    """

    def __init__(
        self, conflist: dict[str, object], cni_path: list[str], extra_env: dict[str, str], netns: str = ""
    ) -> None:
        self.conflist, self.cni_path, self.extra_env = conflist, cni_path, extra_env
        self.netns = netns

    def _netconf(
        self, plugin: dict[str, object], prev: dict[str, object] | None, runtime_config: dict[str, object]
    ) -> dict[str, object]:
        conf = {**plugin, "name": self.conflist["name"], "cniVersion": self.conflist["cniVersion"]}
        caps = plugin.get("capabilities") or {}
        rc = {k: v for k, v in runtime_config.items() if isinstance(caps, dict) and caps.get(k)}
        if rc:
            conf["runtimeConfig"] = rc
        if prev is not None:
            conf["prevResult"] = prev
        return conf

    def locate(self, plugin_type: str) -> list[str]:
        """The argv that runs the plugin: the first `cni_path` dir holding it, as libcni finds it."""
        exe = next((Path(d) / plugin_type for d in self.cni_path if (Path(d) / plugin_type).exists()), None)
        if exe is None:
            raise FileNotFoundError(f"{plugin_type} not in {self.cni_path}")
        return [str(exe)]

    def exec(self, plugin_type: str, env: dict[str, str], netconf: dict[str, object]) -> CniCall:
        import subprocess

        argv = in_netns(self.netns, self.locate(plugin_type))
        full = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "CNI_PATH": ":".join(self.cni_path),
            **self.extra_env,
            **env,
        }
        t0 = time.perf_counter()
        proc = subprocess.run(argv, input=json.dumps(netconf).encode(), env=full, capture_output=True)
        ms = (time.perf_counter() - t0) * 1000
        text = proc.stdout.decode().strip()
        return CniCall(proc.returncode, json.loads(text) if text else {}, proc.stderr.decode(), (ms,))

    def _env(self, command: str, cid: str, netns: str, ifname: str, args: str) -> dict[str, str]:
        return {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": cid,
            "CNI_NETNS": netns,
            "CNI_IFNAME": ifname,
            "CNI_ARGS": args,
        }

    def _plugins(self) -> list[dict[str, object]]:
        plugins: list[dict[str, object]] = self.conflist["plugins"]  # type: ignore[assignment]
        return list(plugins)

    def add(
        self,
        cid: str,
        netns: str,
        ifname: str = "eth0",
        args: str = "",
        runtime_config: dict[str, object] | None = None,
    ) -> CniCall:
        prev: dict[str, object] | None = None
        call, times = CniCall(0, {}, ""), tuple[float, ...]()
        for plugin in self._plugins():
            conf = self._netconf(plugin, prev, runtime_config or {})
            call = self.exec(str(plugin["type"]), self._env("ADD", cid, netns, ifname, args), conf)
            times += call.plugin_ms
            call = replace(call, plugin_ms=times)
            if call.rc != 0:
                return call
            prev = call.out
        return call

    def check(
        self,
        cid: str,
        netns: str,
        prev: dict[str, object],
        ifname: str = "eth0",
        args: str = "",
        runtime_config: dict[str, object] | None = None,
    ) -> CniCall:
        call = CniCall(0, {}, "")
        for plugin in self._plugins():
            conf = self._netconf(plugin, prev, runtime_config or {})
            call = self.exec(str(plugin["type"]), self._env("CHECK", cid, netns, ifname, args), conf)
            if call.rc != 0:
                return call
        return call

    def delete(
        self,
        cid: str,
        netns: str,
        prev: dict[str, object] | None,
        ifname: str = "eth0",
        args: str = "",
        runtime_config: dict[str, object] | None = None,
    ) -> CniCall:
        call, times = CniCall(0, {}, ""), tuple[float, ...]()
        for plugin in reversed(self._plugins()):
            conf = self._netconf(plugin, prev, runtime_config or {})
            call = self.exec(str(plugin["type"]), self._env("DEL", cid, netns, ifname, args), conf)
            times += call.plugin_ms
            call = replace(call, plugin_ms=times)
            if call.rc != 0:
                return call
        return call

    def gc(self, valid: Iterable[tuple[str, str]]) -> CniCall:
        """GC over the list: every plugin that speaks a version with GC (1.1.0, asked by VERSION; the
        others never heard of the command), each told the attachments (containerID, ifname) the
        runtime still has (`cni.dev/valid-attachments`)."""
        attachments = [{"containerID": cid, "ifname": ifname} for cid, ifname in valid]
        call = CniCall(0, {}, "")
        for plugin in self._plugins():
            version = self.exec(str(plugin["type"]), {"CNI_COMMAND": "VERSION"}, {"cniVersion": "1.1.0"})
            if "1.1.0" not in version.out.get("supportedVersions", []):  # type: ignore[operator]
                continue
            conf = {**self._netconf(plugin, None, {}), "cni.dev/valid-attachments": attachments}
            call = self.exec(str(plugin["type"]), {"CNI_COMMAND": "GC"}, conf)
            if call.rc != 0:
                return call
        return call


def installed_runtime(env: Mapping[str, str], *, chained: bool = True) -> CniRuntime:
    """A runtime over what node-up installed, as kubelet has it: the conflist and the plugin dirs.

    No variable of ours is passed: the executable finds the agent through the conflist's
    `agentSocket`. `chained=False` keeps only prismnet (no portmap), for pods that map no ports.
    """
    conflist = json.loads(Path(env["PRISMNET_CNI_CONFLIST"]).read_text())
    if not chained:
        conflist["plugins"] = conflist["plugins"][:1]
    cni_path = [str(Path(env["PRISMNET_CNI_BIN"]).parent), "/usr/lib/cni"]
    return CniRuntime(conflist, cni_path, {}, env.get("K8SHOST_NETNS", ""))


def _readyz(address: str) -> str:
    """The agent's own account of what it waits for (its /readyz body), or why there is none."""
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=2) as r:
            return str(r.read().decode().strip())
    except urllib.error.HTTPError as e:
        return str(e.read().decode().strip())
    except OSError as e:
        return f"unreachable ({e})"
