"""One container of a Pod as `podman run` arguments, following the PodSpec the way kubelet and a CRI
runtime (containerd/CRI-O) apply it:

- `command` replaces the image's entrypoint, `args` its cmd, both with `$(VAR)` expanded;
- env values reach podman through its own environment (`--env NAME`), never its command line;
- the Pod's network and PID namespace: the node's (hostNetwork/hostPID) or the pod's sandbox netns;
  the node's /etc/hosts entries for host-network pods, the pod name as hostname otherwise;
- securityContext (container over pod): runAsUser/runAsGroup, runAsNonRoot (refused for uid 0 as
  kubelet refuses it), fsGroup/supplementalGroups, capabilities add/drop, privileged,
  allowPrivilegeEscalation=false (no_new_privs), readOnlyRootFilesystem (with no tmpfs added:
  `--read-only-tmpfs=false`), seccomp (RuntimeDefault -> podman's default profile; Unconfined or
  unset -> unconfined, kubelet's default without --seccomp-default), sysctls;
- no pulls (`--pull=never`): the image is the one `make image` built, or the container fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodeenv.kubelet.envvars import ConfigError, expand
from nodeenv.kubelet.volumes import Mount

Obj = dict[str, Any]
PODMAN_OWN_ENV = ("PATH", "HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "TMPDIR")


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    network: str
    """"host" or a netns path (`ns:` is added)."""
    host_pid: bool
    hostname: str
    hosts: tuple[tuple[str, str], ...] = ()
    """The node's /etc/hosts entries (name, address) for host-network pods."""


def _security(pod_sc: Obj, sc: Obj) -> list[str]:
    merged = {**pod_sc, **sc}
    args: list[str] = []
    uid, gid = merged.get("runAsUser"), merged.get("runAsGroup")
    if merged.get("runAsNonRoot") and uid is None:
        raise ConfigError("container has runAsNonRoot and image will run as root")
    if merged.get("runAsNonRoot") and uid == 0:
        raise ConfigError("container's runAsUser breaks non-root policy")
    if uid is not None:
        args += ["--user", f"{uid}:{gid if gid is not None else 0}"]
    for g in [pod_sc.get("fsGroup"), *(pod_sc.get("supplementalGroups") or [])]:
        if g is not None:
            args += ["--group-add", str(g)]
    if sc.get("privileged"):
        args.append("--privileged")
    caps = sc.get("capabilities") or {}
    args += [a for c in caps.get("drop") or [] for a in ("--cap-drop", c)]
    args += [a for c in caps.get("add") or [] for a in ("--cap-add", c)]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    seccomp = (merged.get("seccompProfile") or {}).get("type", "Unconfined")
    if seccomp == "Localhost":
        raise ConfigError("seccomp Localhost profiles are not supported by this runner")
    if seccomp != "RuntimeDefault" and not sc.get("privileged"):
        args += ["--security-opt", "seccomp=unconfined"]
    return args


def _mount(m: Mount) -> list[str]:
    opts = [f"type=bind,source={m.source},destination={m.target}"]
    opts += ["readonly=true"] if m.read_only else []
    opts += [f"bind-propagation={m.propagation}"] if m.propagation else []
    return ["--mount", ",".join(opts)]


def run_args(
    pod: Obj, container: Obj, env: dict[str, str], mounts: list[Mount], placement: Placement, name: str
) -> tuple[list[str], dict[str, str]]:
    """(`podman run` arguments after `run`, the environment podman needs for `--env NAME`)."""
    spec = pod["spec"]
    args = [
        "--name",
        name,
        "--pull=never",
        "--label",
        f"io.kubernetes.pod.uid={pod['metadata'].get('uid', '')}",
    ]
    args += ["--network", "host" if placement.network == "host" else f"ns:{placement.network}"]
    if placement.network == "host":
        args += [a for host, ip in placement.hosts for a in ("--add-host", f"{host}:{ip}")]
    else:
        args += ["--hostname", placement.hostname]
    args += ["--pid", "host"] if placement.host_pid else []
    if container.get("workingDir"):
        args += ["--workdir", container["workingDir"]]
    args += _security(spec.get("securityContext") or {}, container.get("securityContext") or {})
    args += [
        a
        for s in (spec.get("securityContext") or {}).get("sysctls") or []
        for a in ("--sysctl", f"{s['name']}={s['value']}")
    ]
    for m in mounts:
        args += _mount(m)
    podman_env: dict[str, str] = {}
    for k, v in env.items():
        if k in PODMAN_OWN_ENV:
            args += ["--env", f"{k}={v}"]
        else:
            args += ["--env", k]
            podman_env[k] = v
    command = [expand(c, env) for c in container.get("command") or []]
    cargs = [expand(a, env) for a in container.get("args") or []]
    if command:
        args += ["--entrypoint", command[0]]
    args.append(container["image"])
    args += command[1:] + cargs
    return args, podman_env
