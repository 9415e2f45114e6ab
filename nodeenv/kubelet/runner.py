"""The loop: workloads -> Pods, scheduled (workloads.py, when this runner plays the controllers),
then for each Pod bound to this node, what kubelet does: volumes, init containers one by one to
completion, then the containers, probes, restarts (restartPolicy Always, liveness failures) and
the Pod's status written back.

Everything it cannot do for a container is named once in its log, with the pod, the container
and kubelet's reason (ErrImageNeverPull, CreateContainerConfigError, StartError, Unhealthy, ...),
and in the container's status."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeenv.kubelet import dns, endpoints, rootdir, workloads
from nodeenv.kubelet.apiclient import ApiError, KubeClient, register_node
from nodeenv.kubelet.envvars import ConfigError, PodContext, container_env
from nodeenv.kubelet.events import NORMAL, WARNING, KubeletEvents
from nodeenv.kubelet.notbooted import not_booted
from nodeenv.kubelet.podman_args import Placement, run_args
from nodeenv.kubelet.probes import KINDS, LABEL, ProbeTracker, run_probe
from nodeenv.kubelet.resourcestats import ContainerUsage, cgroup_usage, render
from nodeenv.kubelet.sandbox import NOT_READY, CniConfig, PodSandbox, SandboxError
from nodeenv.kubelet.sidecars import runtime as stand_ins
from nodeenv.kubelet.status import ContainerState, now, pod_status
from nodeenv.kubelet.storage.node import NodeStorage
from nodeenv.kubelet.storage.volumebinding import claims_of
from nodeenv.kubelet.teardown import Steps, stop_processes
from nodeenv.kubelet.volumes import Mount, NodeRoot, PodVolumes, TokenSource

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CORE = "/api/v1"
RUNNER_LABEL = "io.k8shost.runner"
STANDIN_GRACE = 10.0
"""Seconds a stand-in has to exit after SIGTERM before it is killed by PID."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerSettings:
    node_name: str
    node_ip: str = "127.0.0.1"
    node_root: Path
    """hostPath volumes live under it (volumes.NodeRoot)."""
    state_dir: Path
    """Pod directories (volumes)."""
    podman_env: Mapping[str, str]
    hosts: tuple[tuple[str, str], ...] = ()
    """The node's /etc/hosts entries, given to host-network pods."""
    period: float = 1.0
    labels: Mapping[str, str] = field(
        default_factory=lambda: {
            "node-role.kubernetes.io/control-plane": "true",
            "node-role.kubernetes.io/master": "true",
        }
    )
    """The Node's labels; a single k3s server's by default."""
    cni: CniConfig | None = None
    """The node's CNI conf dir and plugin dirs (containerd's conf_dir/bin_dir); None: no pod network."""
    sandbox_retry: float = 5.0
    """Seconds before a pod whose sandbox failed is tried again (kubelet's next sync)."""
    cluster_dns: tuple[str, ...] = ()
    """kubelet's --cluster-dns (none: every Pod gets the node's resolv.conf, as kubelet does then)."""
    cluster_domain: str = "cluster.local"
    resolv_conf: Path = Path("/etc/resolv.conf")
    """kubelet's --resolv-conf: the node's resolver configuration."""
    kubelet_port: int = 0
    """The kubelet API's port, published in the Node's status.daemonEndpoints (0: none served)."""
    controllers: bool = True
    """Also play kube-controller-manager and the scheduler (workloads.py, endpoints.py): one runner
    of a cluster does, the others are only their node's kubelet."""


class Podman:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **env}

    def __call__(
        self, *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args],
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def states(self, runner_id: str) -> dict[str, Obj]:
        out = self("ps", "-a", "--format", "json", "--filter", f"label={RUNNER_LABEL}={runner_id}").stdout
        return {c["Names"][0]: c for c in json.loads(out or "[]")}


def _reason(stderr: str) -> tuple[str, str]:
    msg = stderr.strip().splitlines()[-1] if stderr.strip() else "podman failed"
    if "image not known" in msg or "unable to find" in msg.lower():
        return (
            "ErrImageNeverPull",
            f"image is not present with pull policy of Never (no registry here): {msg}",
        )
    if "executable file not found" in msg or "no such file or directory" in msg:
        return "StartError", msg
    return "RunContainerError", msg


@dataclass
class PodRuntime:
    pod: Obj
    runner: Runner
    init: list[ContainerState] = field(default_factory=list)
    main: list[ContainerState] = field(default_factory=list)
    probes: dict[str, list[ProbeTracker]] = field(default_factory=dict)
    started_at: str = field(default_factory=now)
    ready_to_start: bool = False
    phase_started: bool = False
    last_status: str = ""
    volumes: PodVolumes | None = None
    backoff: dict[str, float] = field(default_factory=dict)
    """Container name -> when its CrashLoopBackOff ends."""
    sandbox: PodSandbox | None = None
    retry_at: float | None = None
    """When boot() is tried again after the sandbox failed."""
    standins: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    """Container name -> the process standing in for a sidecar container (nodeenv/kubelet/sidecars/)."""
    resolv_conf: Path | None = None
    """The pod's /etc/resolv.conf (dns.py), when it is not the node's."""

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    def cname(self, container: str) -> str:
        m = self.pod["metadata"]
        return f"k8s_{container}_{m['name']}_{m['namespace']}_{m['uid'][:8]}"

    @property
    def netns_name(self) -> str | None:
        """The pod's network namespace (None: the node's, a host-network pod)."""
        return self.sandbox.netns_name if self.sandbox else None

    def standin_log(self, container: str) -> Path:
        uid: str = self.pod["metadata"]["uid"]
        return self.runner.settings.state_dir / uid / "logs" / f"{container}.log"

    def keep_previous(self, container: str) -> None:
        """The container's last instance kept as `<name>_previous` (its logs are `logs --previous`, as
        kubelet keeps the dead container), an older one removed."""
        name = self.cname(container)
        self.runner.podman("rm", "-f", f"{name}_previous")
        if self.runner.podman("rename", name, f"{name}_previous").returncode:
            self.runner.podman("rm", "-f", name)

    def ctx(self) -> PodContext:
        s = self.runner.settings
        host, port = self.runner.api_address
        return PodContext(pod=self.pod, host_ip=s.node_ip, pod_ip=self.pod_ip, api_host=host, api_port=port)

    @property
    def pod_ip(self) -> str:
        if self.pod["spec"].get("hostNetwork"):
            return self.runner.settings.node_ip
        return self.sandbox.ip if self.sandbox else ""

    def event(self, type_: str, reason: str, message: str, container: str = "") -> None:
        self.runner.events.pod(self.pod, type_, reason, message, container)

    def _started_events(self, c: Obj) -> None:
        """What kubelet records for a container it started (the image is always local here)."""
        self.event(NORMAL, "Pulled", f'Container image "{c["image"]}" already present on machine', c["name"])
        self.event(NORMAL, "Created", f"Created container: {c['name']}", c["name"])
        self.event(NORMAL, "Started", f"Started container {c['name']}", c["name"])

    def report(self, state: ContainerState, reason: str, message: str) -> None:
        if state.state.get("waiting", {}).get("reason") != reason:
            log.warning("pod %s container %s: %s: %s", self.key, state.name, reason, message)
        state.waiting(reason, message)

    def boot(self) -> None:
        """Sandbox, volumes, init containers in order, then the containers (runs on a thread)."""
        spec = self.pod["spec"]
        self.init = [ContainerState(c["name"], c["image"]) for c in spec.get("initContainers") or []]
        self.main = [ContainerState(c["name"], c["image"]) for c in spec["containers"]]
        if not spec.get("hostNetwork") and not self.make_sandbox():
            return
        self.ready_to_start = True
        s = self.runner.settings
        self.volumes = PodVolumes(NodeRoot(s.node_root), s.state_dir / self.pod["metadata"]["uid"],
                                  self.runner.lookup, self.runner.tokens,
                                  claims=self.runner.storage.volumes.mount)  # fmt: skip
        try:
            self.volumes.make(self.ctx())
        except (ConfigError, ApiError) as e:
            for st in self.init + self.main:
                self.report(st, getattr(e, "reason", "CreateContainerConfigError"), str(e))
            made = self.volumes.made
            vol = next((v["name"] for v in spec.get("volumes") or [] if v["name"] not in made), "")
            self.event(WARNING, "FailedMount", f'MountVolume.SetUp failed for volume "{vol}" : {e}')
            return
        self.write_resolv_conf()
        for c, st in zip(spec.get("initContainers") or [], self.init, strict=True):
            if not self.run_init(c, st):
                return
        for c, st in zip(spec["containers"], self.main, strict=True):
            self.start(c, st)
        self.phase_started = True

    def write_resolv_conf(self) -> None:
        """The pod's resolv.conf from its dnsPolicy and dnsConfig, as kubelet writes it (dns.py)."""
        s = self.runner.settings
        node = dns.ResolvConf.parse(s.resolv_conf.read_text() if s.resolv_conf.exists() else "")
        conf = dns.pod_resolv_conf(self.pod, s.cluster_dns, s.cluster_domain, node)
        if conf is not None:
            self.resolv_conf = s.state_dir / self.pod["metadata"]["uid"] / "resolv.conf"
            self.resolv_conf.parent.mkdir(parents=True, exist_ok=True)
            self.resolv_conf.write_text(conf.render())

    def mounts(self, c: Obj) -> list[Mount]:
        assert self.volumes is not None
        resolv = [Mount(self.resolv_conf, "/etc/resolv.conf", False)] if self.resolv_conf else []
        return self.volumes.mounts(c) + resolv

    def make_sandbox(self) -> bool:
        """The pod's netns on the node's CNI network; False (containers waiting, retried later) if not."""
        cni = self.runner.settings.cni
        self.sandbox = PodSandbox(self.pod, cni or CniConfig(Path("/nonexistent"), ()))
        try:
            if cni is None:
                raise SandboxError(NOT_READY)
            ip = self.sandbox.create()
        except SandboxError as e:
            self.sandbox = None
            for st in self.init + self.main:
                self.report(st, "ContainerCreating", str(e))
            self.retry_at = time.monotonic() + self.runner.settings.sandbox_retry
            return False
        log.info("pod %s: sandbox %s, pod IP %s", self.key, self.sandbox.netns, ip)
        return True

    def _args(self, c: Obj, st: ContainerState, detach: bool) -> tuple[list[str], dict[str, str]] | None:
        assert self.volumes is not None
        why = not_booted(c["image"])
        if why:
            self.report(st, "NotBooted", f"{c['image']}: {why}")
            return None
        try:
            env = container_env(self.runner.lookup, self.ctx(), c)
            spec = self.pod["spec"]
            placement = Placement(
                network=self.sandbox.netns if self.sandbox else "host", host_pid=bool(spec.get("hostPID")),
                hostname=self.pod["metadata"]["name"], hosts=self.runner.settings.hosts,
            )  # fmt: skip
            args, penv = run_args(self.pod, c, env, self.mounts(c), placement, self.cname(c["name"]))
        except (ConfigError, ValueError) as e:
            self.report(st, "CreateContainerConfigError", str(e))
            return None
        label = ["--label", f"{RUNNER_LABEL}={self.runner.runner_id}"]
        return ["run", *(["-d"] if detach else []), *label, *args], penv

    def run_init(self, c: Obj, st: ContainerState) -> bool:
        built = self._args(c, st, detach=False)
        if built is None:
            return False
        self.runner.podman("rm", "-f", self.cname(c["name"]))
        st.state = {"running": {"startedAt": now()}}
        self._started_events(c)
        proc = self.runner.podman(*built[0], extra_env=built[1], timeout=600)
        if proc.returncode:
            reason, msg = (
                ("Error", proc.stderr.strip()[-500:])
                if "Error: " not in proc.stderr
                else _reason(proc.stderr)
            )
            st.state = {"terminated": {"exitCode": proc.returncode, "reason": reason, "message": msg}}
            log.warning(
                "pod %s init container %s: %s (exit %d): %s", self.key, st.name, reason, proc.returncode, msg
            )
            return False
        st.state = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        return True

    def start(self, c: Obj, st: ContainerState) -> None:
        if stand_ins.start(self, c, st):
            if "running" in st.state:
                self._started_events(c)
            return
        built = self._args(c, st, detach=True)
        if built is None:
            return
        self.keep_previous(c["name"])
        proc = self.runner.podman(*built[0], extra_env=built[1])
        if proc.returncode:
            reason, msg = _reason(proc.stderr)
            self.report(st, reason, msg)
            self.event(WARNING, "Failed", f"Error: {reason}: {msg}", c["name"])
            return
        self._started_events(c)
        st.container_id = proc.stdout.strip()
        st.state = {"running": {"startedAt": now()}}
        t = time.monotonic()
        self.probes[c["name"]] = [ProbeTracker(k, c[k], t) for k in KINDS if k in c]
        st.started = "startupProbe" not in c
        st.ready = st.started and "readinessProbe" not in c

    def refresh(self, states: dict[str, Obj]) -> None:
        """Exited containers: terminated, and restarted (restartPolicy Always) after kubelet's
        back-off; running ones: their due probes."""
        if not self.phase_started:
            return
        for c, st in zip(self.pod["spec"]["containers"], self.main, strict=True):
            info = states.get(self.cname(c["name"]))
            until = self.backoff.get(c["name"])
            if until is not None and time.monotonic() >= until:
                del self.backoff[c["name"]]
                try:
                    self.start(c, st)
                except OSError:
                    self.backoff[c["name"]] = time.monotonic()  # tried again on the next pass
                    raise
                continue
            if stand_ins.check(self, c, st) or info is None or "running" not in st.state:
                continue
            if info.get("State") == "exited":
                code = int(info.get("ExitCode", 0))
                logs = self.runner.podman("logs", "--tail", "5", self.cname(c["name"])).stderr.strip()
                st.last_state = {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed",
                                                "message": logs[-500:],
                                                "containerID": f"podman://{st.container_id}"}}  # fmt: skip
                log.warning("pod %s container %s exited %d: %s", self.key, st.name, code, logs[-300:])
                self.restart(c, st, "CrashLoopBackOff")
                continue
            self.run_probes(c, st)

    def restart(self, c: Obj, st: ContainerState, reason: str) -> None:
        st.restarts += 1
        if self.pod["spec"].get("restartPolicy", "Always") == "Never":
            st.state = st.last_state
            return
        delay = min(10 * 2 ** (st.restarts - 1), 300)  # kubelet's back-off: 10 s doubling, 5 min cap
        self.report(st, reason, f"back-off {delay}s restarting failed container {st.name} in pod {self.key}")
        m = self.pod["metadata"]
        pod = f"{m['name']}_{m['namespace']}({m['uid']})"  # kubelet's format.Pod
        self.event(
            WARNING, "BackOff", f"Back-off restarting failed container {st.name} in pod {pod}", st.name
        )
        self.backoff[c["name"]] = time.monotonic() + delay

    def run_probes(self, c: Obj, st: ContainerState) -> None:
        t = time.monotonic()
        name = self.cname(c["name"])

        def in_container(cmd: list[str], timeout: float) -> tuple[int, str]:
            p = self.runner.podman("exec", name, *cmd, timeout=timeout)
            return p.returncode, p.stdout + p.stderr

        for tracker in self.probes.get(c["name"], []):
            if tracker.kind != "startupProbe" and not st.started:
                continue
            if (tracker.kind == "startupProbe" and st.started) or not tracker.due(t):
                continue
            ok, reason = run_probe(tracker.probe, c, self.pod_ip, in_container)
            if not ok:
                log.warning("pod %s container %s: Unhealthy: %s probe failed: %s",
                            self.key, st.name, LABEL[tracker.kind], reason)  # fmt: skip
                self.event(WARNING, "Unhealthy", f"{LABEL[tracker.kind]} probe failed: {reason}", st.name)
            crossed = tracker.record(time.monotonic(), ok, reason)
            if tracker.kind == "readinessProbe" and crossed is not None:
                st.ready = crossed
            elif tracker.kind == "startupProbe" and crossed is True:
                st.started = True
                st.ready = not any(p.kind == "readinessProbe" for p in self.probes[c["name"]])
            elif crossed is False:  # liveness or startup failed: kubelet kills and restarts it
                log.warning("pod %s container %s failed %s probe, will be restarted", self.key, st.name,
                            LABEL[tracker.kind].lower())  # fmt: skip
                why = f"Container {st.name} failed {LABEL[tracker.kind].lower()} probe, will be restarted"
                self.event(NORMAL, "Killing", why, st.name)
                self.runner.podman("stop", "-t", "1", name)  # kept for `logs --previous` (keep_previous)
                st.last_state = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "Error",
                        "containerID": f"podman://{st.container_id}",
                    }
                }
                self.restart(c, st, "CrashLoopBackOff")
                return

    def status(self) -> Obj:
        return pod_status(init=self.init, main=self.main, host_ip=self.runner.settings.node_ip,
                          pod_ip=self.pod_ip if self.ready_to_start else "", sandbox=self.ready_to_start,
                          start_time=self.started_at)  # fmt: skip

    def stop(self) -> None:
        """Containers removed, then the sandbox: CNI DEL and its netns deleted. Each step is tried
        whatever the ones before did (a podman that hangs, a stand-in that ignores SIGTERM); the
        first failure is raised after the rest is cleaned."""
        steps = Steps(f"pod {self.key}")
        for c, st in zip(self.pod["spec"]["containers"], self.main, strict=False):
            if "running" in st.state:
                with steps.step(f"event for {c['name']}"):
                    self.event(NORMAL, "Killing", f"Stopping container {c['name']}", c["name"])
        # one podman call, its containers stopped in parallel as kubelet kills a pod's containers: a call
        # each waited on the store's lock in turn (8 containers: 29 s one by one, 3 s in one call)
        names = [
            self.cname(c["name"])
            for c in self.pod["spec"].get("initContainers", []) + self.pod["spec"]["containers"]
        ]
        with steps.step("removing containers"):
            self.runner.podman("rm", "-f", "--ignore", "-t", "2", *names, *(f"{n}_previous" for n in names))
        with steps.step("stopping stand-ins"):
            stop_processes(self.standins.values(), STANDIN_GRACE, f"pod {self.key}")
        self.standins.clear()
        if claims_of(self.pod):
            with steps.step("unmounting volumes"):
                self.runner.storage.volumes.unmount(self.pod["metadata"]["uid"])
        if self.sandbox is not None:
            with steps.step("StopPodSandbox"):
                why = self.sandbox.destroy()
                if why:
                    log.warning("pod %s: StopPodSandbox: %s", self.key, why)
            self.sandbox = None
        steps.done()


class Runner:
    def __init__(
        self, settings: RunnerSettings, client: KubeClient, tokens: TokenSource | None = None
    ) -> None:
        self.settings, self.client = settings, client
        self.podman = Podman(settings.podman_env)
        self.events = KubeletEvents(client, settings.node_name)
        self.tokens: TokenSource = tokens or self.request_token
        self.runner_id = settings.node_name
        self.pods: dict[str, PodRuntime] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pod")
        self._lock = threading.Lock()
        self.kubelet_dir = NodeRoot(settings.node_root).host("/var/lib/kubelet")
        self._bound_kubelet_dir = False
        self.storage = NodeStorage(client, settings.node_name, NodeRoot(settings.node_root), self.kubelet_dir,
                                   cluster=settings.controllers)  # fmt: skip
        url = urllib.parse.urlsplit(client.server)
        self.api_address = (url.hostname or "127.0.0.1", url.port or 443)
        self._cgroups: dict[str, str] = {}
        self._objects: dict[tuple[str, str, str], Obj | None] = {}
        """Container id -> its cgroup (podman's State.CgroupPath)."""

    def find_pod(self, namespace: str, name: str) -> PodRuntime | None:
        """This node's pod by name (the kubelet API's view)."""
        for rt in list(self.pods.values()):
            m = rt.pod["metadata"]
            if m["namespace"] == namespace and m["name"] == name:
                return rt
        return None

    def lookup(self, plural: str, namespace: str, name: str) -> Obj | None:
        """A ConfigMap or Secret a container's env names; while the API is unreachable, the copy last
        read (kubelet's object cache), so a crashed container still restarts."""
        key = (plural, namespace, name)
        try:
            self._objects[key] = self.client.get(CORE, plural, namespace, name)
        except OSError:
            if key not in self._objects:
                raise
        return self._objects[key]

    def request_token(self, namespace: str, sa: str, seconds: int) -> str:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}  # fmt: skip
        reply = self.client.request("POST", f"{CORE}/namespaces/{namespace}/serviceaccounts/{sa}/token", body)
        token: str = reply["status"]["token"]
        return token

    def register_node(self) -> None:
        """The Node object kubelet registers, Ready, with its InternalIP."""
        s = self.settings
        register_node(self.client, s.node_name, s.node_ip, s.labels, s.kubelet_port)

    def sync_pods(self) -> None:
        mine = [
            p for p in self.client.list(CORE, "pods") if p["spec"].get("nodeName") == self.settings.node_name
        ]
        for p in mine:
            uid = p["metadata"]["uid"]
            if uid not in self.pods:
                rt = self.pods[uid] = PodRuntime(p, self)
                self._pool.submit(self._boot, rt)
            elif (rt := self.pods[uid]).retry_at is not None and time.monotonic() >= rt.retry_at:
                rt.retry_at = None
                self._pool.submit(self._boot, rt)
        gone = {p["metadata"]["uid"] for p in mine}
        for uid in [u for u in self.pods if u not in gone]:
            log.info("pod %s deleted: stopping it", self.pods[uid].key)
            self.events.forget(uid)
            self._pool.submit(self.pods.pop(uid).stop)
        self.supervise()

    def supervise(self, report: bool = True) -> None:
        """kubelet's pod workers over the pods this node already runs: exited containers restarted
        after the back-off, due probes run; `report`: each pod's status written to the API. Also
        while the API is unreachable (report=False): a real kubelet restarts a crashed container from
        what it knows, so a node whose own network the crashed one carries (ovs-vswitchd with the
        node's address on br-phy) gets it back."""
        states = self.podman.states(self.runner_id)
        for rt in list(self.pods.values()):
            try:
                rt.refresh(states)
            except (ApiError, OSError) as e:
                if report:
                    raise
                log.warning("pod %s: supervising without the API: %s", rt.key, e)
            if report:
                self.write_status(rt)

    def _boot(self, rt: PodRuntime) -> None:
        try:
            rt.boot()
        except Exception:
            log.exception("pod %s: boot crashed", rt.key)

    def write_status(self, rt: PodRuntime) -> None:
        if not rt.main:
            return
        status = rt.status()
        text = json.dumps(status, sort_keys=True)
        if text != rt.last_status:
            m = rt.pod["metadata"]
            self.client.patch_status(CORE, "pods", m["namespace"], m["name"], status)
            rt.last_status = text

    def step(self) -> None:
        if self.settings.controllers:
            workloads.sync(self.client)
        self.sync_pods()
        if self.settings.controllers:
            endpoints.sync(self.client)
        self.storage.sync()

    def resource_metrics(self) -> bytes:
        """kubelet's /metrics/resource: the node's and each running container's usage."""
        running = [(rt, st) for rt in list(self.pods.values()) for st in rt.main
                   if st.container_id and st.runtime == "podman" and "running" in st.state]  # fmt: skip
        unknown = [st.container_id for _, st in running if st.container_id not in self._cgroups]
        if unknown:
            out = self.podman("inspect", "--format", "{{.Id}} {{.State.CgroupPath}}", *unknown).stdout
            for line in out.splitlines():
                cid, _, path = line.partition(" ")
                self._cgroups[cid] = path
        samples = []
        for rt, st in running:
            usage = (
                cgroup_usage(self._cgroups.get(st.container_id, ""))
                if st.container_id in self._cgroups
                else None
            )
            if usage is not None:
                m = rt.pod["metadata"]
                samples.append(ContainerUsage(m["namespace"], m["name"], st.name, usage))
        return render(cgroup_usage("/"), samples)

    def run(self, stop: threading.Event) -> None:
        self._bound_kubelet_dir = rootdir.setup(self.kubelet_dir)
        self.register_node()
        while not stop.is_set():
            try:
                self.step()
            except (ApiError, OSError) as e:
                log.warning("sync failed: %s", e)
                try:
                    self.supervise(report=False)
                except OSError as e:
                    log.warning("supervising without the API failed: %s", e)
            stop.wait(self.settings.period)

    def drain(self) -> None:
        """Stop every pod on the pod network (their CNI DELs need the host-network pods: the CNI
        agent, and OVN central's members, perhaps on other nodes, which a cluster's `down` keeps
        until every node is drained), all at once; nothing is booted any more (the loop is over)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        steps = Steps(f"runner {self.runner_id}: drain")
        # pods using claims first (their teardown needs the CSI pods)
        with steps.step("pods with claims"):
            self._stop_pods([rt for rt in self.pods.values() if claims_of(rt.pod)])
        with steps.step("pod-network pods"):
            self._stop_pods([rt for rt in self.pods.values() if not rt.pod["spec"].get("hostNetwork")])
        steps.done()

    def shutdown(self) -> None:
        """Every pod stopped and the kubelet root unbound, whatever one step does (the first failure
        raised after the rest)."""
        steps = Steps(f"runner {self.runner_id}: shutdown")
        with steps.step("drain"):
            self.drain()
        with steps.step("host-network pods"):
            self._stop_pods(list(self.pods.values()))
        if self._bound_kubelet_dir:
            with steps.step("kubelet root"):
                rootdir.teardown(self.kubelet_dir)
        steps.done()

    def _stop_pods(self, group: list[PodRuntime]) -> None:
        """All at once: a container that ignores SIGTERM takes its grace period. Every pod of the
        group is stopped and forgotten; the first failure is raised after."""
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="stop") as pool:
            stops = [pool.submit(rt.stop) for rt in group]
        for rt in group:
            self.pods.pop(rt.pod["metadata"]["uid"], None)
        steps = Steps(f"runner {self.runner_id}")
        steps.add(f.exception() for f in stops)
        steps.done()
