"""PodSpec -> podman arguments and environment, pure (no podman)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from nodeenv.kubelet.envvars import ConfigError, PodContext, container_env
from nodeenv.kubelet.podman_args import Placement, run_args
from nodeenv.kubelet.volumes import Mount, NodeRoot

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"nodeName": "n1"}}
OBJECTS = {
    ("configmaps", "ns", "cfg"): {"data": {"A": "1"}},
    ("secrets", "ns", "sec"): {"data": {"pw": base64.b64encode(b"s3cret").decode()}},
}


def ctx() -> PodContext:
    return PodContext(pod=POD, host_ip="10.0.0.1", pod_ip="10.0.0.1", api_host="127.0.0.1", api_port=6443)


def test_env_resolves_refs_decodes_secrets_and_expands() -> None:
    c = {"envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "X_"}], "env": [
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "pw"}}},
        {"name": "B", "value": "$(NODE)-$(X_A)-$$(NODE)"},
    ]}  # fmt: skip
    env = container_env(lambda k, ns, n: OBJECTS.get((k, ns, n)), ctx(), c)
    assert env["NODE"] == "n1" and env["PW"] == "s3cret" and env["B"] == "n1-1-$(NODE)"
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and env["KUBERNETES_SERVICE_PORT"] == "6443"


def test_missing_key_is_a_config_error_unless_optional() -> None:
    ref = {"name": "cfg", "key": "nope"}
    c = {"env": [{"name": "V", "valueFrom": {"configMapKeyRef": ref}}]}
    with pytest.raises(ConfigError, match="couldn't find key nope in ConfigMap ns/cfg"):
        container_env(lambda k, ns, n: OBJECTS.get((k, ns, n)), ctx(), c)
    ref["optional"] = True  # type: ignore[assignment]
    assert "V" not in container_env(lambda k, ns, n: OBJECTS.get((k, ns, n)), ctx(), c)


def test_security_context_command_and_mounts() -> None:
    c = {"name": "c", "image": "img:1", "command": ["prog", "-x"], "args": ["--y=$(A)"],
         "securityContext": {"runAsUser": 65534, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
                             "allowPrivilegeEscalation": False,
                             "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
                             "seccompProfile": {"type": "RuntimeDefault"}}}  # fmt: skip
    mounts = [Mount(Path("/r/run/x"), "/run/x", True, "rslave")]
    args, penv = run_args(POD, c, {"A": "1", "PATH": "/bin"}, mounts, Placement(network="host", host_pid=True,
                          hostname="p", hosts=(("prismnet-server", "10.0.0.9"),)), "k8s_c")  # fmt: skip
    joined = " ".join(args)
    assert "--user 65534:0" in joined and "--read-only --read-only-tmpfs=false" in joined
    assert "--cap-drop ALL --cap-add NET_ADMIN" in joined and "no-new-privileges" in joined
    assert "seccomp=unconfined" not in joined and "--network host" in joined and "--pid host" in joined
    assert "--add-host prismnet-server:10.0.0.9" in joined
    assert "type=bind,source=/r/run/x,destination=/run/x,readonly=true,bind-propagation=rslave" in joined
    assert args[-3:] == ["img:1", "-x", "--y=1"]
    assert args[args.index("--entrypoint") + 1] == "prog"
    assert penv == {"A": "1"} and "--env" in args and "PATH=/bin" in args  # values never on the command line


def test_run_as_non_root_without_a_user_is_refused() -> None:
    c = {"name": "c", "image": "i", "securityContext": {"runAsNonRoot": True}}
    with pytest.raises(ConfigError, match="runAsNonRoot"):
        run_args(POD, c, {}, [], Placement(network="host", host_pid=False, hostname="p"), "n")


def test_host_paths_stay_under_the_node_root_except_devices() -> None:
    root = NodeRoot(Path("/tmp/node"))
    assert root.host("/etc/cni/net.d") == Path("/tmp/node/etc/cni/net.d")
    assert root.host("/dev") == Path("/dev") and root.host("/lib/modules") == Path("/lib/modules")
