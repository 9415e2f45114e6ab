"""Agent settings (flags with env fallbacks), attachment naming, the OVSDB row watcher."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from cni.attachment import Attachment, mac_for, parse_alias
from cni.settings import AgentSettings
from ovnaccess.watch import Watcher


def test_flags_override_env_which_overrides_defaults() -> None:
    env = {"PRISMNET_BRIDGE": "br-env", "PRISMNET_MTU": "1300", "PRISMNET_MASQUERADE": "false"}
    s = AgentSettings.from_argv(["--mtu", "1200"], env)
    assert (s.bridge, s.mtu, s.masquerade) == ("br-env", 1200, False)
    assert AgentSettings.from_argv([], {}).socket == Path("/run/prismnet/cni.sock")
    assert s.management_if == "pnm-br-env"


@pytest.mark.parametrize("argv", [["--subnet-prefix", "8"], ["--cluster-cidr", "nonsense"], ["--mtu", "100"]])
def test_invalid_settings_exit_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        AgentSettings.from_argv(argv, {})
    assert e.value.code == 2


def _att(cid: str = "0123456789abcdef" * 4, ifname: str = "eth0") -> Attachment:
    return Attachment(
        container_id=cid,
        ifname=ifname,
        network="prismnet",
        namespace="ns",
        pod="web",
        netns="/run/netns/x",
        node="n1",
    )


def test_attachment_names() -> None:
    a = _att()
    assert a.switch == "k8s-ns" and a.lsp == f"web-{a.container_id}"
    assert len(a.host_if) <= 15 and a.host_if == _att().host_if != _att(ifname="net1").host_if
    assert _att(ifname="net1").lsp.endswith("-net1")
    assert parse_alias(a.alias) == ("prismnet", a.container_id, "eth0")
    assert Attachment.from_ids(a.external_ids()) == a
    assert mac_for("10.244.1.5") == "0a:58:0a:f4:01:05"


def test_watcher_fires_on_matching_update_only() -> None:
    w = Watcher()
    with w.expect("Interface", "pn1", lambda row: row.external_ids.get("ovn-installed") == "true") as exp:
        w.notify("Interface", SimpleNamespace(name="pn1", external_ids={}))
        w.notify("Interface", SimpleNamespace(name="pn2", external_ids={"ovn-installed": "true"}))
        assert exp.wait(0.01) is None
        threading.Timer(
            0.01, w.notify, ("Interface", SimpleNamespace(name="pn1", external_ids={"ovn-installed": "true"}))
        ).start()
        assert exp.wait(5) is True
    assert w._waits == {}


def test_agent_help_names_every_flag_and_its_env_var() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cni.daemon.main", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for flag, var in (
        ("--socket", "PRISMNET_SOCKET"),
        ("--ovn-nb-db", "PRISMNET_OVN_NB_DB"),
        ("--port-up-timeout", "PRISMNET_PORT_UP_TIMEOUT"),
        ("--metrics-address", "PRISMNET_METRICS_ADDRESS"),
    ):
        assert flag in out.stdout and var in out.stdout


def test_the_agent_takes_its_ovn_certificate_and_refuses_a_key_others_can_read(tmp_path: Path) -> None:
    files = {n: tmp_path / n for n in ("a.key", "a.crt", "ca.crt")}
    for path in files.values():
        path.write_text("x")
    files["a.key"].chmod(0o644)
    env = {"OVN_SSL_PRIVATE_KEY": str(files["a.key"]), "OVN_SSL_CERTIFICATE": str(files["a.crt"]),
           "OVN_SSL_CA_CERT": str(files["ca.crt"])}  # fmt: skip
    s = AgentSettings.from_argv(["--ovn-nb-db", "ssl:10.0.0.1:6641"], env)
    assert s.ovn_tls is not None and s.ovn_tls.private_key == files["a.key"]
    out = subprocess.run([sys.executable, "-m", "cni.daemon.main", "--ovn-nb-db", "ssl:10.0.0.1:6641"],
                         capture_output=True, text=True, env={**os.environ, **env}, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "0644" in out.stderr + out.stdout, (out.stdout, out.stderr)
