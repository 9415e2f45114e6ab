"""RBAC coverage: the Roles/ClusterRoles in daemonsets/ against the requests each controller really made.

The Kubernetes API double records every request with the user that made it. Controllers' integration
tests run their controller under its service-account identity (`kube_api.kubeconfig_for(
"system:serviceaccount:kube-system:<name>")`); this plugin collects those records from every test that
uses `kube_api` and checks them against the RBAC the k3s overlay renders for that service account:

- after each test, every request it saw from a service account the manifests define must be allowed by
  that account's rules (else the test errors, naming the requests and the missing rules);
- at the end of a session that ran every controller integration test (`make test`, `make integration`,
  or `pytest tests/integration/controllers`), every grant in those rules must have been used by some
  request, or be listed in ALLOWANCE below with the reason it is kept (else the session fails).

Controller tests feed it without doing anything else: use `kube_api` and the service-account kubeconfig.
`check_requests(user, records)` and `unused_grants(user, records)` are the same checks as functions.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.auth import RequestRecord
from nodeenv.kubeapi.rbac import not_covered

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "daemonsets" / "overlays" / "k3s"
CONTROLLER_TESTS = ROOT / "tests" / "integration" / "controllers"
SA_PREFIX = "system:serviceaccount:"
Obj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Grant:
    """One (scope, group, resource[/subresource], verb, resourceName) a rule grants; scope "" is
    cluster-wide (a ClusterRoleBinding), else the RoleBinding's namespace; name "" means any."""

    scope: str
    group: str
    resource: str
    verb: str
    name: str = ""

    def __str__(self) -> str:
        where = f" in {self.scope}" if self.scope else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.resource}{f'.{self.group}' if self.group else ''}{named}{where}"


def _sa(name: str) -> str:
    return f"{SA_PREFIX}kube-system:{name}"


_NOT_A_VERB = (
    "escalate/bind are checked by the RBAC API when a Role/RoleBinding is written, never request verbs"
)
_SERIES = (
    "EventRecorder patches/updates an Event when it repeats (a series); no test repeats one as this account"
)


def _events(*verbs: str, reason: str = _SERIES) -> dict[Grant, str]:
    return {Grant("", "events.k8s.io", "events", v): reason for v in verbs}


# Grants kept although no test exercises them, each with its reason.
# Keyed by service-account username; resources as "group/plural" ("/plural" for the core group).
ALLOWANCE: dict[str, dict[Grant, str]] = {
    _sa("flashdns-controller"): _events("patch"),
    _sa("netpol-controller"): _events("patch", "update"),
    _sa("project-controller"): {
        **_events("patch", "update"),
        **{Grant("", "rbac.authorization.k8s.io", "roles", v, n): _NOT_A_VERB
           for v in ("escalate", "bind") for n in ("org-admin", "project-admin", "project-viewer")},
    },
}  # fmt: skip
UPSTREAM_GRANTS = {_sa("lightningstor-csi-controller")}
"""Roles that hold what the Kubernetes CSI sidecars ask for (their upstream RBAC): the runner's
stand-ins do only part of the sidecars' work, so not every grant is used here. Requests outside
the role are still refused and reported."""


@functools.cache
def _rendered() -> tuple[Obj, ...]:
    from tests.unit.daemonsets.rendered import objects

    return objects(OVERLAY)


def _binds(binding: Obj, user: str) -> bool:
    ns, _, name = user.removeprefix(SA_PREFIX).partition(":")
    for s in binding.get("subjects") or []:
        if s.get("kind") == "ServiceAccount" and (s.get("namespace"), s.get("name")) == (ns, name):
            return True
        if s.get("kind") == "Group" and s.get("name") in (
            "system:serviceaccounts",
            f"system:serviceaccounts:{ns}",
        ):
            return True
        if s.get("kind") == "User" and s.get("name") == user:
            return True
    return False


def scoped_rules(user: str, rendered: Iterable[Obj] | None = None) -> list[tuple[str, Obj]]:
    """(scope, rule) for every PolicyRule the manifests bind to `user`."""
    objs = list(_rendered() if rendered is None else rendered)
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs
             if o["kind"] in ("Role", "ClusterRole")}  # fmt: skip
    out = []
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding") or not _binds(b, user):
            continue
        scope = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else ""
        ref = b["roleRef"]
        role = roles.get((ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"]))
        assert role is not None, (
            f"{b['kind']} {b['metadata']['name']} refers to missing {ref['kind']} {ref['name']}"
        )
        out += [(scope, rule) for rule in role.get("rules") or []]
    return out


def defined_accounts(rendered: Iterable[Obj] | None = None) -> set[str]:
    objs = _rendered() if rendered is None else rendered
    return {f"{SA_PREFIX}{o['metadata']['namespace']}:{o['metadata']['name']}" for o in objs
            if o["kind"] == "ServiceAccount"}  # fmt: skip


def check_requests(
    user: str, records: Iterable[RequestRecord], rendered: Iterable[Obj] | None = None
) -> list[str]:
    """`user`'s requests that its manifest RBAC would refuse, as readable lines."""
    rules = scoped_rules(user, rendered)
    mine = [r for r in records if r.user == user]
    refused = [
        r for r in mine if not_covered([rule for scope, rule in rules if scope in ("", r.namespace)], [r])
    ]
    return sorted({f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
                   f"{'.' + r.group if r.group else ''} {r.namespace or '(cluster)'}/{r.name or '*'}"
                   for r in refused})  # fmt: skip


def grants(user: str, rendered: Iterable[Obj] | None = None) -> set[Grant]:
    out = set()
    for scope, rule in scoped_rules(user, rendered):
        for g in rule.get("apiGroups") or []:
            for res in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    out |= {Grant(scope, g, res, verb, n) for n in rule.get("resourceNames") or [""]}
    return out


def _used(grant: Grant, r: RequestRecord) -> bool:
    resource = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
    return (
        grant.verb in ("*", r.verb)
        and grant.group in ("*", r.group)
        and grant.resource in ("*", resource)
        and grant.scope in ("", r.namespace)
        and grant.name in ("", r.name)
    )


def unused_grants(
    user: str, records: Iterable[RequestRecord], rendered: Iterable[Obj] | None = None
) -> list[str]:
    """Grants no recorded request of `user` used and ALLOWANCE does not list: more than it needs."""
    if user in UPSTREAM_GRANTS:
        return []
    mine = [r for r in records if r.user == user]
    allowed = ALLOWANCE.get(user, {})
    return [
        str(g)
        for g in sorted(grants(user, rendered))
        if g not in allowed and not any(_used(g, r) for r in mine)
    ]


# --- the pytest plugin ------------------------------------------------------------------------------


class Collector:
    def __init__(self) -> None:
        self.records: dict[str, list[RequestRecord]] = defaultdict(list)

    def add(self, records: Iterable[RequestRecord]) -> list[RequestRecord]:
        accounts = defined_accounts()
        mine = [r for r in records if r.user in accounts]
        for r in mine:
            self.records[r.user].append(r)
        return mine


_COLLECTOR_KEY = pytest.StashKey[Collector]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_COLLECTOR_KEY] = Collector()


@pytest.fixture(autouse=True)
def _rbac_coverage(request: pytest.FixtureRequest) -> Iterator[None]:
    if "kube_api" not in request.fixturenames:
        yield
        return
    kube_api = request.getfixturevalue("kube_api")
    yield
    mine = request.config.stash[_COLLECTOR_KEY].add(list(kube_api.requests))
    problems = {u: check_requests(u, mine) for u in {r.user for r in mine}}
    problems = {u: p for u, p in problems.items() if p}
    if problems:
        lines = [f"{u}: {', '.join(p)}" for u, p in sorted(problems.items())]
        pytest.fail(
            "requests the daemonsets/ RBAC does not allow (add the rule to the manifest):\n"
            + "\n".join(lines)
        )


def _ran_every_controller_test(session: pytest.Session) -> bool:
    ran = {Path(str(item.path)) for item in session.items}
    wanted = {p for p in CONTROLLER_TESTS.rglob("test_*.py")}
    deselected = session.config.getoption("keyword") or session.config.getoption("markexpr")
    return bool(wanted) and wanted <= ran and not deselected and session.testsfailed == 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _ran_every_controller_test(session):
        return
    collector = session.config.stash[_COLLECTOR_KEY]
    excess = {u: unused_grants(u, collector.records[u]) for u in sorted(collector.records)}
    excess = {u: e for u, e in excess.items() if e}
    if excess:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "\n".join(f"{u}: {', '.join(e)}" for u, e in excess.items())
        if reporter is not None:
            reporter.write_sep(
                "=",
                "RBAC grants no controller test used (remove, or list in tests/rbac_coverage.py ALLOWANCE)",
            )
            reporter.write_line(text)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    collector = config.stash[_COLLECTOR_KEY]
    if not collector.records:
        return
    terminalreporter.write_sep("-", "RBAC coverage (tests/rbac_coverage.py)")
    for user in sorted(collector.records):
        records = collector.records[user]
        refused = check_requests(user, records)
        unused = unused_grants(user, records)
        terminalreporter.write_line(f"{user}: {len(records)} requests; outside its RBAC: "
                                    f"{', '.join(refused) or 'none'}; grants not used here: "
                                    f"{', '.join(unused) or 'none'}")  # fmt: skip
