"""The runner's per-container hook for sidecar images it stands in for (sidecars/__init__.py): the
stand-in started in the container's place (launch.py) with the container's resolved env and mounts,
its status Running and Ready while the process runs (containerID `standin://<module file>:<pid>`,
which names the stand-in), and, when it exits, Terminated and restarted with kubelet's back-off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodeenv.kubelet.envvars import ConfigError, container_env
from nodeenv.kubelet.sidecars import launch, module_path, stand_in_module
from nodeenv.kubelet.status import ContainerState, now

if TYPE_CHECKING:
    from nodeenv.kubelet.runner import PodRuntime

Obj = dict[str, Any]


def start(rt: PodRuntime, c: Obj, st: ContainerState) -> bool:
    """Start the stand-in for `c` if its image has one (True), else leave it to podman (False)."""
    module = stand_in_module(c["image"])
    if module is None:
        return False
    assert rt.volumes is not None
    try:
        mounts, env = rt.volumes.mounts(c), container_env(rt.runner.lookup, rt.ctx(), c)
        logs = rt.runner.settings.state_dir / rt.pod["metadata"]["uid"] / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{c['name']}.log", "ab") as out:
            proc = launch.start(
                module,
                c,
                mounts,
                rt.sandbox.netns_name if rt.sandbox else None,
                env=env,
                pod_name=rt.pod["metadata"]["name"],
                log=out,
            )
    except (ConfigError, ValueError) as e:
        rt.report(st, "CreateContainerConfigError", str(e))
        return True
    rt.standins[c["name"]] = proc
    st.runtime, st.container_id = "standin", f"{module_path(module)}:{proc.pid}"
    st.state = {"running": {"startedAt": now()}}
    st.started = st.ready = True
    return True


def check(rt: PodRuntime, c: Obj, st: ContainerState) -> bool:
    """For a stand-in's container (True): Terminated and restarted once its process has exited."""
    proc = rt.standins.get(c["name"])
    if proc is None:
        return False
    code = proc.poll()
    if code is not None and "running" in st.state:
        del rt.standins[c["name"]]
        module = st.container_id.split(":")[0]
        st.last_state = {
            "terminated": {
                "exitCode": code,
                "reason": "Error" if code else "Completed",
                "message": f"stand-in {module} exited",
            }
        }
        rt.restart(c, st, "CrashLoopBackOff")
    return True
