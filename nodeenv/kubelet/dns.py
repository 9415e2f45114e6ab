"""A Pod's /etc/resolv.conf as kubelet makes it (pkg/kubelet/network/dns), from its dnsPolicy and
dnsConfig, the cluster DNS and domain (kubelet's --cluster-dns, --cluster-domain) and the node's
resolv.conf (--resolv-conf):

- ClusterFirst (the default): the cluster DNS as nameserver, the search path
  `<namespace>.svc.<domain> svc.<domain> <domain>` followed by the node's search domains, and
  `options ndots:5`; a hostNetwork Pod gets the node's resolv.conf instead (kubelet falls back to
  Default for it), as does every Pod when no cluster DNS is configured;
- ClusterFirstWithHostNet: the cluster's, hostNetwork or not;
- Default: the node's;
- None: only what dnsConfig says.
dnsConfig's nameservers and searches are appended (duplicates dropped), its options merged by name
(a later value wins). kubelet's limits are kept: 3 nameservers, 32 search domains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
MAX_NAMESERVERS, MAX_SEARCHES = 3, 32


@dataclass(frozen=True, slots=True)
class ResolvConf:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ResolvConf:
        ns: list[str] = []
        search: list[str] = []
        opts: list[str] = []
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] == "nameserver" and len(words) > 1:
                ns.append(words[1])
            elif words[0] in ("search", "domain"):
                search = words[1:]  # the last search/domain line wins, as in the resolver
            elif words[0] == "options":
                opts += words[1:]
        return cls(tuple(ns), tuple(search), tuple(opts))

    def render(self) -> str:
        lines = [f"search {' '.join(self.searches)}"] if self.searches else []
        lines += [f"nameserver {n}" for n in self.nameservers]
        lines += [f"options {' '.join(self.options)}"] if self.options else []
        return "".join(line + "\n" for line in lines)


def _uniq(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _merge_options(base: tuple[str, ...], extra: list[Obj]) -> tuple[str, ...]:
    merged: dict[str, str] = {}
    for text in base:
        name, _, value = text.partition(":")
        merged[name] = value
    for o in extra:
        merged[o["name"]] = str(o.get("value", "") or "")
    return tuple(f"{k}:{v}" if v else k for k, v in merged.items())


def pod_resolv_conf(
    pod: Obj, cluster_dns: tuple[str, ...], domain: str, node: ResolvConf
) -> ResolvConf | None:
    """The Pod's resolv.conf, or None when it is the node's own (the runtime's default)."""
    spec = pod["spec"]
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    host_net = bool(spec.get("hostNetwork"))
    cluster = policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not host_net)
    if policy == "None":
        base = ResolvConf()
    elif cluster and cluster_dns:
        ns = pod["metadata"].get("namespace", "default")
        searches = (f"{ns}.svc.{domain}", f"svc.{domain}", domain, *node.searches)
        base = ResolvConf(cluster_dns, _uniq(list(searches)), ("ndots:5",))
    else:
        base = node
    cfg = spec.get("dnsConfig") or {}
    if not cfg and base is node:
        return None
    return ResolvConf(
        nameservers=_uniq([*base.nameservers, *(cfg.get("nameservers") or [])])[:MAX_NAMESERVERS],
        searches=_uniq([*base.searches, *(cfg.get("searches") or [])])[:MAX_SEARCHES],
        options=_merge_options(base.options, cfg.get("options") or []),
    )
