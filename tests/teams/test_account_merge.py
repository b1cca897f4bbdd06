"""Two "alice"s after Entra ID sign-in was turned on (issue 29 #23): the member list says which
is the local account and which the Entra ID one, and a platform admin merges the local account
into the Entra ID one: memberships, workspaces and API tokens move, audited, nothing lost."""

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from teams.models import ApiToken, AuditEntry, Membership, Profile, Role
from tests.factories import MembershipFactory, UserFactory, WorkspaceFactory
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_alices(cast):
    local = UserFactory(username="alice-local")
    MembershipFactory(team=cast.team, user=local, role=Role.TEAM_ADMIN)
    entra = UserFactory(username="alice@example.org")
    Profile.objects.create(user=entra, signin_object_id=uuid.uuid4())
    MembershipFactory(team=cast.team, user=entra, role=Role.RESEARCHER)
    MembershipFactory(team=cast.other_team, user=local, role=Role.RESEARCHER)
    ws = WorkspaceFactory(team=cast.team, owner=local, name="alices-vm")
    now = timezone.now()
    later = now + timedelta(days=30)
    ApiToken.objects.create(user=local, name="laptop", scope="write", token_hash="a" * 64,
                            prefix="abcd", created_at=now, expires_at=later)  # fmt: skip
    return local, entra, ws


def _merge(client, user, cast, local, username):
    client.force_login(user)
    member = Membership.objects.get(team=cast.team, user=local)
    url = reverse("team-member-merge", kwargs={"slug": cast.team.slug, "pk": member.pk})
    return client.post(url, {"entra_username": username})


def test_the_member_list_says_which_account_is_local_and_which_entra(client, cast, two_alices):
    client.force_login(cast.platform_admin)
    page = client.get(reverse("team-detail", kwargs={"slug": cast.team.slug})).content.decode()
    local, entra, _ws = two_alices

    def row(user):
        member = Membership.objects.get(team=cast.team, user=user)
        return page[page.index(f'<tr id="member-{member.pk}">') :].split("</tr>")[0]

    local_row, entra_row = row(local), row(entra)
    assert 'data-testid="account-kind">Local account' in local_row
    assert 'data-testid="account-kind">Entra ID' in entra_row
    assert "Merge into Entra ID account" in local_row
    assert "Merge into Entra ID account" not in entra_row


def test_a_platform_admin_merges_the_local_account_into_the_entra_one(client, cast, two_alices):
    local, entra, ws = two_alices
    answer = _merge(client, cast.platform_admin, cast, local, "alice@example.org")
    assert answer.status_code == 302
    ws.refresh_from_db()
    local.refresh_from_db()
    assert ws.owner == entra and not Workspace.objects.filter(owner=local).exists()
    assert ApiToken.objects.get(name="laptop").user == entra
    assert not Membership.objects.filter(user=local).exists()
    roles = dict(Membership.objects.filter(user=entra).values_list("team__slug", "role"))
    assert roles == {cast.team.slug: Role.TEAM_ADMIN, cast.other_team.slug: Role.RESEARCHER}
    assert not local.is_active and not local.has_usable_password()
    audit = AuditEntry.objects.get(action="account.merge")
    assert audit.actor == cast.platform_admin and audit.after["account"] == "alice@example.org"
    assert audit.after["moved"]["workspaces"] == 1


def test_only_a_platform_admin_merges_and_never_into_a_local_account(client, cast, two_alices):
    local, entra, ws = two_alices
    assert _merge(client, cast.team_admin, cast, local, entra.username).status_code == 403
    refused = _merge(client, cast.platform_admin, cast, local, cast.researcher.username)
    assert "is not an account that signs in with Entra ID" in refused.content.decode()
    ws.refresh_from_db()
    assert ws.owner == local and Membership.objects.filter(user=local).count() == 2
