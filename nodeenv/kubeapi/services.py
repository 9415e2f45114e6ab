"""Service defaulting, validation and IP/port allocation (pkg/registry/core/service and its rest storage).

Faithful: type defaults to ClusterIP; sessionAffinity None; ports' protocol TCP and targetPort =
port; ipFamilies [IPv4] / ipFamilyPolicy SingleStack; clusterIP allocated from the service CIDR (a
requested one honoured, 422 when in use or out of range; `None` = headless; none for ExternalName);
clusterIPs mirrors clusterIP; nodePorts allocated for NodePort/LoadBalancer (unless
allocateLoadBalancerNodePorts=false), honoured when requested, dropped and released when the type
goes back to ClusterIP (422 when a new one is asked for a ClusterIP Service); externalTrafficPolicy
and internalTrafficPolicy Cluster; status on create is replaced by {loadBalancer: {}} (only /status
writes it).
Simplified: IPv4 single-stack only; healthCheckNodePort is not allocated.
"""

from __future__ import annotations

import contextlib
from typing import Any

from nodeenv.kubeapi.allocator import ClusterIPs, InUse, NodePorts, OutOfRange, RangeFull
from nodeenv.kubeapi.errors import Invalid, invalid
from nodeenv.kubeapi.kinds import Kind

Obj = dict[str, Any]
TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
Cause = tuple[str, str, str]


class ServiceAllocator:
    def __init__(
        self, kind: Kind, cidr: str = "10.96.0.0/16", node_ports: tuple[int, int] = (30000, 32767)
    ) -> None:
        self.kind = kind
        self.ips = ClusterIPs(cidr)
        self.ports = NodePorts(*node_ports)

    def restore(self, obj: Obj) -> None:
        """A stored Service read back from disk: its ClusterIP and nodePorts taken again."""
        spec = obj.get("spec") or {}
        for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
            if ip and ip != "None":
                with contextlib.suppress(InUse, OutOfRange):
                    self.ips.reserve(ip)
        for p in spec.get("ports") or []:
            if p.get("nodePort"):
                with contextlib.suppress(InUse, OutOfRange):
                    self.ports.reserve(p["nodePort"])

    # lifecycle hooks
    def on_create(self, obj: Obj) -> None:
        obj["status"] = {"loadBalancer": {}}  # PrepareForCreate drops any status sent
        spec = obj.setdefault("spec", {})
        self._defaults(obj, spec)
        self._validate(obj, spec)
        ip = self._allocate_ip(obj, spec)
        try:
            self._node_ports(obj, spec, {})
        except Invalid:
            if ip:
                self.ips.release(ip)
            raise

    def on_update(self, old: Obj, new: Obj) -> None:
        spec, old_spec = new.setdefault("spec", {}), old.get("spec", {})
        self._defaults(new, spec)
        self._validate(new, spec)
        old_ip = old_spec.get("clusterIP")
        if spec.get("type") == "ExternalName":
            self._release(old)
            for k in ("clusterIP", "clusterIPs"):
                spec.pop(k, None)
            return
        wanted = spec.get("clusterIP")
        if old_ip and wanted not in (None, "", old_ip):
            raise self._bad(new, "spec.clusterIPs[0]", f'Invalid value: "{wanted}": may not change once set')
        if old_ip:
            spec["clusterIP"], spec["clusterIPs"] = old_ip, old_spec.get("clusterIPs", [old_ip])
        else:
            self._allocate_ip(new, spec)
        old_ports = {
            (p.get("port"), p.get("protocol")): p.get("nodePort") for p in old_spec.get("ports") or []
        }
        self._node_ports(new, spec, old_ports)
        for n in set(old_ports.values()) - {p.get("nodePort") for p in spec.get("ports") or []}:
            if n:
                self.ports.release(n)

    def on_delete(self, obj: Obj) -> None:
        self._release(obj)

    # details
    def _release(self, obj: Obj) -> None:
        spec = obj.get("spec", {})
        if spec.get("clusterIP") not in (None, "", "None"):
            self.ips.release(spec["clusterIP"])
        for p in spec.get("ports") or []:
            if p.get("nodePort"):
                self.ports.release(p["nodePort"])

    def _bad(self, obj: Obj, field: str, msg: str, reason: str = "FieldValueInvalid") -> Invalid:
        return invalid(self.kind, obj["metadata"]["name"], [(reason, field, msg)])

    def _defaults(self, obj: Obj, spec: dict[str, Any]) -> None:
        spec.setdefault("type", "ClusterIP")
        if spec["type"] == "ExternalName":
            return
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        for p in spec.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
        obj.setdefault("status", {}).setdefault("loadBalancer", {})

    def _validate(self, obj: Obj, spec: dict[str, Any]) -> None:
        causes: list[Cause] = []
        if spec["type"] not in TYPES:
            supported = ", ".join(f'"{t}"' for t in TYPES)
            causes.append(("FieldValueNotSupported", "spec.type",
                           f'Unsupported value: "{spec["type"]}": '
                           f"supported values: {supported}"))  # fmt: skip
        ports = spec.get("ports") or []
        headless = spec.get("clusterIP") == "None"
        if not ports and not headless and spec["type"] != "ExternalName":
            causes.append(("FieldValueRequired", "spec.ports", "Required value"))
        for i, p in enumerate(ports):
            causes.extend(self._port_problems(i, p, len(ports)))
        if spec["type"] == "ExternalName" and not spec.get("externalName"):
            causes.append(("FieldValueRequired", "spec.externalName", "Required value"))
        if causes:
            raise invalid(self.kind, obj["metadata"]["name"], causes)

    @staticmethod
    def _port_problems(i: int, p: Any, n: int) -> list[Cause]:
        if not isinstance(p, dict):
            return [("FieldValueInvalid", f"spec.ports[{i}]", "Invalid value: must be an object")]
        out: list[Cause] = []
        port = p.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            out.append(("FieldValueInvalid", f"spec.ports[{i}].port",
                        f"Invalid value: {port}: must be between 1 and 65535, inclusive"))  # fmt: skip
        if n > 1 and not p.get("name"):
            out.append(("FieldValueRequired", f"spec.ports[{i}].name", "Required value"))
        if p.get("protocol") not in ("TCP", "UDP", "SCTP"):
            out.append(("FieldValueNotSupported", f"spec.ports[{i}].protocol",
                        f'Unsupported value: "{p.get("protocol")}": '
                        'supported values: "SCTP", "TCP", "UDP"'))  # fmt: skip
        return out

    def _allocate_ip(self, obj: Obj, spec: dict[str, Any]) -> str | None:
        if spec["type"] == "ExternalName":
            return None
        wanted = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
        if wanted == "None":
            spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
        else:
            spec["clusterIP"] = self._take_ip(obj, wanted)
            spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        return None if wanted == "None" else str(spec["clusterIP"])

    def _take_ip(self, obj: Obj, wanted: str | None) -> str:
        field, shown = "spec.clusterIPs", f'[]string{{"{wanted}"}}'
        try:
            if wanted:
                self.ips.reserve(wanted)
                return wanted
            return self.ips.allocate()
        except InUse:
            msg = f"failed to allocate IP {wanted}: provided IP is already allocated"
        except OutOfRange:
            msg = (f"failed to allocate IP {wanted}: the provided IP ({wanted}) is not in the valid range. "
                   f"The range of valid IPs is {self.ips.net}")  # fmt: skip
        except RangeFull:
            msg = "failed to allocate a serviceIP: range is full"
            shown = "[]string{}"
        raise self._bad(obj, field, f"Invalid value: {shown}: {msg}")

    def _node_ports(self, obj: Obj, spec: dict[str, Any], old: dict[Any, Any]) -> None:
        wants = spec["type"] == "NodePort" or (
            spec["type"] == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)
        )
        taken: list[int] = []
        for i, p in enumerate(spec.get("ports") or []):
            previous = old.get((p.get("port"), p.get("protocol")))
            asked = p.get("nodePort")
            if not wants and asked and asked != previous:
                why = f"Forbidden: may not be used when `type` is '{spec['type']}'"
                raise self._bad(obj, f"spec.ports[{i}].nodePort", why, "FieldValueForbidden")
            if not wants:  # a type change drops the nodePorts it allocated (dropTypeDependentFields)
                p.pop("nodePort", None)
                continue
            if asked and asked == previous:
                continue
            if not asked and previous:
                p["nodePort"] = previous
                continue
            try:
                if asked:
                    self.ports.reserve(asked)
                else:
                    p["nodePort"] = self.ports.allocate()
                taken.append(p["nodePort"])
            except (InUse, OutOfRange, RangeFull) as e:
                for t in taken:
                    self.ports.release(t)
                raise self._bad(obj, f"spec.ports[{i}].nodePort", self._port_msg(asked, e)) from e

    def _port_msg(self, asked: int | None, e: Exception) -> str:
        if isinstance(e, InUse):
            return f"Invalid value: {asked}: provided port is already allocated"
        if isinstance(e, OutOfRange):
            return (f"Invalid value: {asked}: provided port is not in the valid range. "
                    f"The range of valid ports is {self.ports.first}-{self.ports.last}")  # fmt: skip
        return "Invalid value: 0: range is full"
