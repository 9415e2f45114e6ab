"""The pod sandbox's CNI config choice (libcni's), its portMappings, and a failing ADD: the error
names the plugin and why, and the netns it made is gone."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from nodeenv.kubelet.sandbox import NOT_READY, CniConfig, PodSandbox, SandboxError, port_mappings
from tests.conftest import require_root

POD = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "0f3c9a2e-unit"},
    "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080},
                                                     {"containerPort": 53, "protocol": "UDP"}]}]},
}  # fmt: skip


def test_first_config_in_name_order_and_single_plugin_conf_wrapped(tmp_path: Path) -> None:
    (tmp_path / "20-b.conflist").write_text(
        json.dumps({"name": "b", "cniVersion": "1.0.0", "plugins": [{"type": "x"}]})
    )
    (tmp_path / "10-a.conf").write_text(json.dumps({"name": "a", "cniVersion": "1.0.0", "type": "bridge"}))
    (tmp_path / "05-broken.conflist").write_text("{not json")
    (tmp_path / "01-notes.txt").write_text("{}")
    net = CniConfig(tmp_path, ()).network()
    assert net == {
        "name": "a",
        "cniVersion": "1.0.0",
        "plugins": [{"name": "a", "cniVersion": "1.0.0", "type": "bridge"}],
    }
    assert CniConfig(tmp_path / "none", ()).network() is None


def test_port_mappings_only_ports_with_a_host_port() -> None:
    assert port_mappings(POD) == [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": ""}]


def test_no_config_is_network_plugin_not_ready(tmp_path: Path) -> None:
    with pytest.raises(SandboxError) as e:
        PodSandbox(POD, CniConfig(tmp_path, ())).create()
    assert str(e.value) == NOT_READY and "NetworkPluginNotReady" in NOT_READY


def test_failing_add_names_plugin_and_reason_and_removes_netns(tmp_path: Path) -> None:
    require_root()
    conf, bins = tmp_path / "net.d", tmp_path / "bin"
    conf.mkdir()
    bins.mkdir()
    (conf / "10-x.conflist").write_text(
        json.dumps({"name": "x", "cniVersion": "1.0.0", "plugins": [{"type": "nope"}]})
    )
    plugin = bins / "nope"
    reply = {"cniVersion": "1.0.0", "code": 11, "msg": "no addresses left", "details": "pool 10.0.0.0/30"}
    plugin.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{json.dumps(reply)}'\nexit 1\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    sandbox = PodSandbox(POD, CniConfig(conf, (str(bins),)))
    with pytest.raises(SandboxError) as e:
        sandbox.create()
    assert 'plugin type="nope" failed (add): no addresses left pool 10.0.0.0/30' in str(e.value)
    assert not Path(sandbox.netns).exists() and sandbox.ip == ""
