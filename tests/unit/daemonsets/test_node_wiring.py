"""prismnet-agent reaches what ovn-controller leaves on the node (ovs-node): its control socket, which
the agent probes for prismnet_ovn_controller_up, and its log file, which it follows for policy verdicts.
Both resolved through each container's mounts to the same host path, read-only on the agent's side."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import container_env, containers, find, pod_spec
from tests.unit.daemonsets.test_wiring import resolve

Obj = dict[str, Any]


def _agent() -> tuple[Obj, Obj, Any]:
    w = find("DaemonSet", "prismnet-agent")
    (c,) = [c for c in pod_spec(w)["containers"] if c["command"] == ["prismnet-agent"]]
    return w, c, programs.parse("prismnet-agent", c.get("args") or [], container_env(w, c))


def _ovn_controller() -> tuple[Obj, Obj, str]:
    w = find("DaemonSet", "ovs-node")
    (c,) = [c for c in containers(w) if c["name"] == "ovn-controller"]
    return w, c, " ".join(c.get("args") or [])


def _option(script: str, name: str) -> str:
    found = re.search(rf"{name}=(\S+)", script)
    assert found, f"ovn-controller is started without {name}"
    return found.group(1)


def test_the_agent_probes_the_run_dir_ovn_controller_writes_its_socket_to() -> None:
    w, c, settings = _agent()
    assert settings.ovn_rundir, "no --ovn-rundir: prismnet_ovn_controller_up is absent"
    ow, oc, script = _ovn_controller()
    rundir = str(PurePosixPath(_option(script, "--pidfile")).parent)  # the .ctl socket sits by the pidfile
    assert resolve(w, c, str(settings.ovn_rundir))[0] == "host"
    assert resolve(w, c, f"{settings.ovn_rundir}/x.ctl") == resolve(ow, oc, f"{rundir}/x.ctl")


def test_the_agent_follows_the_file_ovn_controller_logs_to() -> None:
    w, c, settings = _agent()
    assert settings.acl_log_file, "no --acl-log-file: no verdict logs"
    ow, oc, script = _ovn_controller()
    assert resolve(w, c, str(settings.acl_log_file)) == resolve(ow, oc, _option(script, "--log-file"))
    assert resolve(w, c, str(settings.acl_log_file))[0] == "host"
    assert "-vconsole:info" in script, "kubectl logs keeps ovn-controller's console log"


def test_the_agent_mounts_ovn_controllers_dirs_read_only() -> None:
    _, c, settings = _agent()
    for path in (str(settings.ovn_rundir), str(settings.acl_log_file)):
        (mount,) = [m for m in c["volumeMounts"] if PurePosixPath(path).is_relative_to(m["mountPath"])]
        assert mount.get("readOnly") is True, mount


def test_the_agent_writes_events_with_its_own_account() -> None:
    _, _, settings = _agent()
    assert settings.events_kubeconfig == "in-cluster"
