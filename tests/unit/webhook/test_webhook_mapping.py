"""Every row of the spec's User/Group mapping table, and the refusals around it."""

from __future__ import annotations

import pytest

from webhook.errors import TokenRejected
from webhook.mapping import ClaimMapper, MappingSettings

SUB = "user-550e8400-e29b-41d4-a716-446655440000"
BASE = {"sub": SUB, "org_id": "org-123", "project_id": "proj-456"}


def test_user_by_verified_email() -> None:
    u = ClaimMapper().map({**BASE, "email": "user@example.com", "email_verified": True, "roles": ["viewer"]})
    assert u.username == "user@example.com"
    assert u.uid == SUB
    assert u.groups == ("org:org-123", "project:proj-456", "system:authenticated")
    assert u.extra == {"org_id": ("org-123",), "project_id": ("proj-456",), "roles": ("viewer",)}


@pytest.mark.parametrize("verified", [False, None, "true", 1])
def test_unverified_email_falls_back_to_the_user_id(verified: object) -> None:
    claims = {**BASE, "email": "user@example.com"}
    if verified is not None:
        claims["email_verified"] = verified
    u = ClaimMapper().map(claims)
    assert u.username == SUB
    assert u.groups == ("org:org-123", "project:proj-456", "system:authenticated")


def test_user_by_id() -> None:
    u = ClaimMapper().map(BASE)
    assert (u.username, u.uid) == (SUB, SUB)
    assert u.groups == ("org:org-123", "project:proj-456", "system:authenticated")
    assert "roles" not in u.extra


def test_bare_uuid_sub_gets_the_user_prefix() -> None:
    u = ClaimMapper().map({**BASE, "sub": "550e8400"})
    assert (u.username, u.uid) == ("user-550e8400", "550e8400")


def test_service_account() -> None:
    u = ClaimMapper().map(
        {**BASE, "sub": "sa-id-9", "principal_type": "service_account", "sa_name": "deployer"}
    )
    assert u.username == "sa-deployer@proj-456"
    assert u.uid == "sa-id-9"
    assert u.groups == ("org:org-123", "project:proj-456", "system:serviceaccounts")


def test_service_account_needs_a_name_and_a_project() -> None:
    with pytest.raises(TokenRejected, match="missing claim sa_name"):
        ClaimMapper().map({**BASE, "principal_type": "service_account"})
    with pytest.raises(TokenRejected, match="missing claim project_id"):
        ClaimMapper().map({"sub": "x", "principal_type": "service_account", "sa_name": "d"})


def test_org_admin_gets_every_project_and_the_admin_group() -> None:
    u = ClaimMapper().map(
        {
            **BASE,
            "email": "admin@example.com",
            "email_verified": True,
            "roles": ["org_admin", "project_member"],
            "projects": ["proj-456", "proj-789"],
        }
    )
    assert u.username == "admin@example.com"
    assert u.groups == (
        "org:org-123",
        "org:org-123:admin",
        "project:proj-456",
        "project:proj-789",
        "system:authenticated",
        "k8s:org-admin",
    )
    assert u.extra["roles"] == ("org_admin", "project_member")


def test_projects_claim_is_ignored_without_the_admin_role() -> None:
    u = ClaimMapper().map({**BASE, "projects": ["proj-789"]})
    assert "project:proj-789" not in u.groups


def test_only_org_admins_get_the_org_admin_group() -> None:
    """Issue 31 item 1: the org's admin group is not every member's."""
    member = ClaimMapper().map({**BASE, "roles": ["project_member"]})
    assert not any(g.endswith(":admin") for g in member.groups)
    assert "org:org-123" in member.groups


def test_a_project_viewer_gets_the_viewer_group_not_the_members() -> None:
    u = ClaimMapper().map({**BASE, "roles": ["project_viewer"]})
    assert u.groups == ("org:org-123", "project:proj-456:viewer", "system:authenticated")
    admin = ClaimMapper().map({**BASE, "roles": ["project_viewer", "org_admin"]})
    assert "project:proj-456" in admin.groups


@pytest.mark.parametrize("claims", [{**BASE, "org_id": "o:admin"}, {**BASE, "project_id": "p:viewer"},
                                    {**BASE, "roles": ["org_admin"], "projects": ["p:viewer"]}])  # fmt: skip
def test_ids_that_would_name_another_group_are_refused(claims: dict[str, object]) -> None:
    with pytest.raises(TokenRejected, match="malformed claim"):
        ClaimMapper().map(claims)


@pytest.mark.parametrize(
    "claims",
    [
        {**BASE, "email": "system:admin@x", "email_verified": True},
        {**BASE, "sub": "system:admin"},
    ],
)
def test_system_usernames_are_refused(claims: dict[str, object]) -> None:
    with pytest.raises(TokenRejected, match="system:"):
        ClaimMapper(MappingSettings(user_prefix="")).map(claims)


def test_system_groups_are_refused() -> None:
    mapper = ClaimMapper(MappingSettings(org_group_prefix="system:"))
    with pytest.raises(TokenRejected, match="system:"):
        mapper.map({**BASE, "org_id": "masters"})


@pytest.mark.parametrize(
    "claims, reason",
    [
        ({"org_id": "x"}, "missing claim sub"),
        ({**BASE, "org_id": 5}, "malformed claim org_id"),
        ({**BASE, "org_id": "with space"}, "malformed claim org_id"),
        ({**BASE, "roles": "org_admin"}, "malformed claim roles"),
        ({**BASE, "roles": ["ok", 3]}, "malformed claim roles"),
        ({**BASE, "email": "not-an-email", "email_verified": True}, "malformed claim email"),
    ],
)
def test_malformed_claims_are_refused(claims: dict[str, object], reason: str) -> None:
    with pytest.raises(TokenRejected, match=reason):
        ClaimMapper().map(claims)


def test_claim_names_and_prefixes_are_configurable() -> None:
    mapper = ClaimMapper(
        MappingSettings(
            claim_org="tenant",
            claim_project="proj",
            org_group_prefix="tenant:",
            project_group_prefix="p:",
            use_email=False,
        )
    )
    u = mapper.map({"sub": SUB, "tenant": "t1", "proj": "p1", "email": "a@b.c", "email_verified": True})
    assert u.username == SUB
    assert u.groups == ("tenant:t1", "p:p1", "system:authenticated")
    assert u.extra == {"org_id": ("t1",), "project_id": ("p1",)}
