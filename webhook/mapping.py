"""IAM claims → Kubernetes user, exactly as the spec's User/Group mapping table says.

| IAM principal   | username              | groups                                                    |
| user (email)    | the verified email    | org:<org_id>, project:<project_id>, system:authenticated  |
| user (id)       | user-<uuid> (= sub)   | org:<org_id>, project:<project_id>, system:authenticated  |
| service account | sa-<name>@<project>   | org:<org_id>, project:<project_id>, system:serviceaccounts|
| org admin       | its email / user id   | the user's groups + project:<p> for every p in `projects` |
|                 |                       | + org:<org_id>:admin + k8s:org-admin                      |

Decisions where the table is silent:
* A token is a service account's when its `principal_type` claim is `service_account`; its
  name is the `sa_name` claim, `<project>` is `project_id` (both required for such a token).
* The email becomes the username only when `email_verified` is JSON `true`; otherwise the
  user is named by id. A `sub` without the `user-` prefix gets it (`abc` → `user-abc`).
* "Org admin" is the role `org_admin` in `roles`; `<all_projects>` is the optional
  `projects` claim (a list) plus `project_id`. Only an org admin gets `org:<org_id>:admin`, the group
  project-controller binds the org-admin Role to: `org:<org_id>`, which every member of the org has,
  grants nothing in a project namespace (issue 31: it made every org member admin of every project).
* A project viewer (the role `project_viewer` in `roles`, without `org_admin`) gets
  `project:<project_id>:viewer` instead of `project:<project_id>`, so the project-viewer binding
  means something; without that role a user is a project member (`project:<project_id>`).
* uid is always `sub`; extra carries org_id, project_id and roles when present.
* Anything the token controls that would yield a `system:` username or group is refused, and so
  are org and project ids with a `:` (org `o:admin`'s member group would be org `o`'s admin group).
All claim names, prefixes, the role and the group names are MappingSettings fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.errors import TokenRejected
from webhook.wire import UserInfo

SYSTEM_PREFIX = "system:"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
_VALUE = re.compile(r"^[^\s\x00-\x1f\x7f]{1,253}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingSettings:
    claim_sub: str = "sub"
    claim_email: str = "email"
    claim_email_verified: str = "email_verified"
    claim_org: str = "org_id"
    claim_project: str = "project_id"
    claim_projects: str = "projects"
    claim_roles: str = "roles"
    claim_principal_type: str = "principal_type"
    claim_sa_name: str = "sa_name"
    service_account_type: str = "service_account"
    user_prefix: str = "user-"
    sa_prefix: str = "sa-"
    org_group_prefix: str = "org:"
    project_group_prefix: str = "project:"
    org_admin_role: str = "org_admin"
    org_admin_group: str = "k8s:org-admin"
    org_admin_suffix: str = ":admin"
    """org:<org> + this: the group of the org's admins (only with org_admin_role)"""
    viewer_role: str = "project_viewer"
    viewer_suffix: str = ":viewer"
    """project:<p> + this: the group of the project's viewers (only with viewer_role)"""
    use_email: bool = True


class ClaimMapper:
    def __init__(self, settings: MappingSettings = MappingSettings()) -> None:
        self.s = settings

    def map(self, claims: Mapping[str, Any]) -> UserInfo:
        s = self.s
        sub = _required(claims, s.claim_sub)
        org, project = _id(claims, s.claim_org), _id(claims, s.claim_project)
        roles = _strings(claims, s.claim_roles)
        is_sa = claims.get(s.claim_principal_type) == s.service_account_type
        username = self._sa_username(claims, project) if is_sa else self._user_username(claims, sub)
        groups = [s.org_group_prefix + org] if org else []
        projects = [project] if project else []
        is_admin = s.org_admin_role in roles
        if is_admin:
            if org:
                groups.append(s.org_group_prefix + org + s.org_admin_suffix)
            projects += [p for p in _ids(claims, s.claim_projects) if p not in projects]
        viewer = "" if is_admin or s.viewer_role not in roles else s.viewer_suffix
        groups += [s.project_group_prefix + p + viewer for p in projects]
        _refuse_system(username, groups)
        groups.append(SERVICE_ACCOUNTS if is_sa else AUTHENTICATED)
        if is_admin:
            groups.append(s.org_admin_group)
        extra = {"org_id": (org,) if org else (), "project_id": (project,) if project else (), "roles": roles}
        return UserInfo(
            username=username, uid=sub, groups=tuple(groups), extra={k: v for k, v in extra.items() if v}
        )

    def _sa_username(self, claims: Mapping[str, Any], project: str | None) -> str:
        name = _required(claims, self.s.claim_sa_name)
        if not project:
            raise TokenRejected(f"missing claim {self.s.claim_project}")
        return f"{self.s.sa_prefix}{name}@{project}"

    def _user_username(self, claims: Mapping[str, Any], sub: str) -> str:
        s = self.s
        email = _string(claims, s.claim_email)
        if s.use_email and email and claims.get(s.claim_email_verified) is True:
            if not _EMAIL.match(email):
                raise TokenRejected(f"malformed claim {s.claim_email}")
            return email
        return sub if sub.startswith(s.user_prefix) else s.user_prefix + sub


def _refuse_system(username: str, groups: list[str]) -> None:
    if username.startswith(SYSTEM_PREFIX) or any(g.startswith(SYSTEM_PREFIX) for g in groups):
        raise TokenRejected("system: identities are refused")


def _required(claims: Mapping[str, Any], name: str) -> str:
    value = _string(claims, name)
    if value is None:
        raise TokenRejected(f"missing claim {name}")
    return value


def _id(claims: Mapping[str, Any], name: str) -> str | None:
    value = _string(claims, name)
    if value is not None and ":" in value:
        raise TokenRejected(f"malformed claim {name}")
    return value


def _ids(claims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    values = _strings(claims, name)
    if any(":" in v for v in values):
        raise TokenRejected(f"malformed claim {name}")
    return values


def _string(claims: Mapping[str, Any], name: str) -> str | None:
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not _VALUE.match(value):
        raise TokenRejected(f"malformed claim {name}")
    return value


def _strings(claims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = claims.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and _VALUE.match(v) for v in value):
        raise TokenRejected(f"malformed claim {name}")
    return tuple(value)
