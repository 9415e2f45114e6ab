"""`prismnet-install`: put the `prismnet` executable and its conflist where runtimes look.

One writer of the conflist for every installer: `make node-up` (nodeenv/cni_component.py)
and the DaemonSet's `install-cni` init container (daemonsets/cni/node-agent.yaml) both call
`install`, so a runtime (kubelet/containerd, CRI-O, podman) needs nothing but what is
written here: the conflist names the agent's socket (`agentSocket`) and the node's OVN.

The executable is the stdlib-only shim (cni/shim.py) behind a two-line launcher run with the
host's `python3 -IS`. When the shim's sources are not on the host (a container installing
onto it), `--lib-dir` copies the two modules the shim needs there; node-up points the
launcher at the repository instead.

The installer takes the agent's own flags and `PRISMNET_*` variables (prismnet-agent --help),
so an init container given the agent container's environment writes the agent's socket.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cni.settings import AgentSettings, build_parser
from cni.shim import SOCKET_KEY, launcher_script

NETWORK_NAME = "prismnet"
CONFLIST_NAME = "10-prismnet.conflist"
SHIM_MODULES = ("shim.py", "errors.py")
"""What the shim imports (cni/errors.py only on VERSION and failures)."""


def conflist(s: AgentSettings) -> dict[str, object]:
    """The spec's conflist for this node (OVN IPAM over the cluster CIDR), portmap chained.

    cniVersion 1.0.0 because Debian's reference plugins (1.1.1) speak up to 1.0.0; with
    plugins >= 1.4 set 1.1.0 so runtimes also send GC and STATUS (prismnet speaks both).
    """
    return {
        "cniVersion": "1.0.0",
        "name": NETWORK_NAME,
        "plugins": [
            {
                "type": "prismnet",
                SOCKET_KEY: str(s.socket),
                "ipam": {"type": "prismnet-ipam", "subnet": s.cluster_cidr},
                "ovn": {"northbound": s.ovn_nb_db, "encapType": "geneve"},
                "mtu": s.mtu,
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


@dataclass(frozen=True, slots=True)
class Installed:
    executable: Path
    conflist: Path
    lib_dir: Path | None


def install(
    root: Path, s: AgentSettings, python: str, source: Path, lib_dir: Path | None = None
) -> Installed:
    """Write `<root>/opt/cni/bin/prismnet` and `<root>/etc/cni/net.d/10-prismnet.conflist`.

    `source` is the directory holding the `cni` package as the host sees it; with `lib_dir`
    (a host path) the shim's modules are copied to `<root><lib_dir>/cni/` and the launcher
    imports them from there. Each file is replaced atomically (kubelet may be running it).
    """
    exe = root / "opt" / "cni" / "bin" / "prismnet"
    conf = root / "etc" / "cni" / "net.d" / CONFLIST_NAME
    import_dir = source
    if lib_dir is not None:
        pkg = root / lib_dir.relative_to("/") / "cni"
        pkg.mkdir(parents=True, exist_ok=True)
        for name in SHIM_MODULES:
            _atomic_write(pkg / name, (source / "cni" / name).read_text(), 0o644)
        _atomic_write(pkg / "__init__.py", "", 0o644)
        import_dir = lib_dir
    exe.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(exe, launcher_script(python, str(import_dir)), 0o755)
    conf.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(conf, json.dumps(conflist(s), indent=2) + "\n", 0o644)
    return Installed(exe, conf, lib_dir)


def _atomic_write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)


def build_install_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = build_parser(env)
    p.prog = "prismnet-install"
    p.description = (
        "Install the prismnet executable and its conflist (naming the agent's socket and OVN). "
        "Takes prismnet-agent's flags and PRISMNET_* variables so both agree."
    )
    p.add_argument("--host-root", type=Path, default=Path(env.get("PRISMNET_HOST_ROOT", "/")),
                   help="where the host's / is mounted (env PRISMNET_HOST_ROOT; default /)")  # fmt: skip
    p.add_argument("--python", default=env.get("PRISMNET_HOST_PYTHON", "/usr/bin/python3"),
                   help="the host's python3 (3.11+) running the shim (env PRISMNET_HOST_PYTHON)")  # fmt: skip
    p.add_argument("--lib-dir", type=Path, default=Path(env.get("PRISMNET_LIB_DIR", "/opt/cni/lib/prismnet")),
                   help="host directory the shim's modules are copied to (env PRISMNET_LIB_DIR)")  # fmt: skip
    return p


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    parser = build_install_parser(os.environ if env is None else env)
    ns = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        settings = AgentSettings.from_namespace(ns)
        settings.validate()
    except ValueError as e:
        parser.error(str(e))
    if not ns.lib_dir.is_absolute():
        parser.error("--lib-dir must be an absolute path on the host")
    source = Path(__file__).resolve().parent.parent
    done = install(ns.host_root, settings, ns.python, source, ns.lib_dir)
    print(f"prismnet-install: {done.executable} and {done.conflist} (agentSocket {settings.socket})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
