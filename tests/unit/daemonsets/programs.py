"""Each suite program's own settings reader, called the way the container starts it: the manifest's
args and the environment kubelet gives it. A reader returns the parsed settings; bad flags or values
end in argparse's usage error (SystemExit), which `parse` turns into a message. `health` names the
port and paths a program's own HTTP server answers, read from those settings."""

from __future__ import annotations

import contextlib
import importlib
import io
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.unit.daemonsets.rendered import ROOT

Reader = Callable[[Sequence[str], Mapping[str, str]], Any]
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@dataclass(frozen=True)
class Health:
    port: int
    liveness: str
    readiness: str


def _agent(argv: Sequence[str], env: Mapping[str, str]) -> Any:
    from cni.settings import AgentSettings

    return AgentSettings.from_argv(argv, env)


def _installer(argv: Sequence[str], env: Mapping[str, str]) -> Any:
    """prismnet-install: prismnet-agent's flags plus where to install (the values are validated by the
    agent's reader on the agent container, and test_wiring checks both agree)."""
    from cni.install import build_install_parser

    return build_install_parser(env).parse_args(list(argv))


def _csi(argv: Sequence[str], env: Mapping[str, str]) -> Any:
    from csi.settings import CsiSettings

    try:
        return CsiSettings.from_args(argv, env)
    except ValueError as e:  # csi.main prints these and exits 2
        raise SystemExit(f"lightningstor-csi: {e}") from e


def _webhook(argv: Sequence[str], env: Mapping[str, str]) -> Any:
    from webhook.settings import parse

    return parse(argv, env)


def _central_exporter(argv: Sequence[str], env: Mapping[str, str]) -> Any:
    from ovnaccess.central_exporter import ExporterSettings

    return ExporterSettings.parse(argv, env)


def _controller_app(program: str) -> Reader:
    """Programs built on controllers.machinery.ControllerApp (module attribute `app`)."""
    from controllers.machinery.settings import parse

    app = module_of(program).app

    def read(argv: Sequence[str], env: Mapping[str, str]) -> Any:
        return parse(app.program, app.description, argv, env, prefix=app.env_prefix,
                     add_arguments=app.add_arguments)  # fmt: skip

    return read


def module_of(program: str) -> Any:
    return importlib.import_module(SCRIPTS[program].partition(":")[0])


def reader(program: str) -> Reader:
    table: dict[str, Reader] = {"prismnet-agent": _agent, "prismnet-install": _installer,
                                "lightningstor-csi": _csi, "iam-webhook": _webhook,
                                "ovn-central-exporter": _central_exporter}  # fmt: skip
    if program in table:
        return table[program]
    if hasattr(module_of(program), "app"):
        return _controller_app(program)
    raise AssertionError(f"{program}: add its settings reader to tests/unit/daemonsets/programs.py")


def parse(program: str, argv: Sequence[str], env: Mapping[str, str]) -> Any:
    """The program's settings for this argv/env, or AssertionError with argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return reader(program)(argv, env)
    except SystemExit as e:
        raise AssertionError(f"{program} {' '.join(argv)}: {err.getvalue().strip() or e}") from e


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def health(program: str, settings: Any) -> Health | None:
    """Where the program itself answers health checks (None: it serves none; a sidecar does)."""
    if program == "prismnet-agent":
        return Health(_port(settings.metrics_address), "/healthz", "/readyz")
    if program == "iam-webhook":
        return Health(settings.health_port, "/healthz", "/readyz")
    if program == "ovn-central-exporter":
        return Health(_port(settings.metrics_address), "/healthz", "/healthz")
    if program == "lightningstor-csi":
        return None  # CSI: the livenessprobe sidecar calls Probe on the socket and serves /healthz
    if hasattr(settings, "metrics_port"):  # ControllerApp: /metrics, /healthz, /readyz
        return Health(settings.metrics_port, "/healthz", "/readyz")
    raise AssertionError(f"{program}: say where it serves health in tests/unit/daemonsets/programs.py")
