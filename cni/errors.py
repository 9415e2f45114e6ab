"""CNI errors carrying their protocol code (CNI SPEC "Well-known Error Codes").

Stdlib only (imported by the shim, whose start-up must stay cheap). Only the edges
(the shim and the agent's HTTP handler) turn these into the error JSON on stdout.
"""

from __future__ import annotations

SUPPORTED_VERSIONS = ("0.4.0", "1.0.0", "1.1.0")
LATEST_VERSION = "1.1.0"


class CniError(Exception):
    code: int = 100  # class-level; 100+ is plugin-specific
    """The CNI error code written to stdout."""

    def __init__(self, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.msg, self.details = msg, details

    def to_reply(self, version: str = LATEST_VERSION) -> dict[str, object]:
        out: dict[str, object] = {"cniVersion": version, "code": self.code, "msg": self.msg}
        if self.details:
            out["details"] = self.details
        return out

    def to_json(self, version: str = LATEST_VERSION) -> str:
        import json  # here, not at the top: the shim imports this module to answer VERSION (~10 ms)

        return json.dumps(self.to_reply(version))

    def __str__(self) -> str:
        return f"{self.msg}: {self.details}" if self.details else self.msg


class IncompatibleVersion(CniError):
    code = 1


class UnsupportedField(CniError):
    code = 2


class ContainerUnknown(CniError):
    code = 3


class InvalidEnvironment(CniError):
    code = 4


class IoFailure(CniError):
    code = 5


class DecodeFailure(CniError):
    code = 6


class InvalidNetworkConfig(CniError):
    code = 7


class TryAgainLater(CniError):
    code = 11


class AgentUnreachable(TryAgainLater):
    """The shim could not talk to prismnet-agent."""


class PortNotReady(TryAgainLater):
    """ovn-controller did not mark the port installed within the timeout."""


class OvnDatabaseUnavailable(TryAgainLater):
    """The OVN database took no write (no leader; its members failed, e.g. their disk full)."""


class PluginNotAvailable(CniError):
    code = 50


class CheckFailed(CniError):
    """CHECK found the attachment differs from prevResult (plugin-specific code)."""

    code = 101


class IpamFailure(CniError):
    """The address source refused or failed (plugin-specific code)."""

    code = 102


class DelegatedPluginError(CniError):
    """A delegated IPAM plugin answered with its own CNI error; its code is passed on."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg, details)
        self._code = code

    def to_reply(self, version: str = LATEST_VERSION) -> dict[str, object]:
        out = super().to_reply(version)
        out["code"] = self._code
        return out


class InternalError(CniError):
    """Anything unexpected; answered without details (they are in the agent's log)."""

    code = 999
