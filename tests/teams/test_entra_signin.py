"""Sign in with Microsoft against the emulated Entra ID: the round trip lands the user on the
team of their group, accounts are keyed by oid, roles come from app roles, membership follows
the groups claim (and Graph past the overage), and every change is audited as Entra ID."""

import time

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from cloudsim.entra.directory import VISION_LAB, demo_oid
from teams import entra_oidc
from teams.models import AuditEntry, Membership, Role, Team
from tests.entra_portal import begin, entra_on_fixture, finish, pick, sign_in  # noqa: F401
from tests.factories import MembershipFactory, TeamFactory

User = get_user_model()


def _user(name: str):
    return User.objects.get(profile__signin_object_id=demo_oid(name))


def test_login_page_offers_microsoft_only_when_configured(client, settings):
    settings.ENTRA_TENANT_ID = settings.ENTRA_CLIENT_ID = ""

    assert "Sign in with Microsoft" not in client.get(reverse("login")).content.decode()
    assert client.get(reverse("entra-login")).status_code == 404
    assert client.get(reverse("entra-callback")).status_code == 404


def test_alice_signs_in_and_lands_on_her_team(client, entra_on):
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with Microsoft" in page
    authorize = begin(client)
    assert "code_challenge_method=S256" in authorize and "nonce=" in authorize

    started = time.perf_counter()
    response = finish(client, pick(authorize, "alice@example.org"))
    print(
        f"\nsign-in round trip (callback: code redeemed, token checked): "
        f"{(time.perf_counter() - started) * 1000:.0f} ms"
    )

    assert response.status_code == 302 and response["Location"] == reverse("workspaces:list")
    teams = client.get(reverse("team-list")).content.decode()
    assert "Vision Lab" in teams and "NLP Group" not in teams
    alice = _user("alice")
    assert alice.username == "alice@example.org" and not alice.is_staff
    assert alice.profile.entra_upn == "alice@example.org"
    assert Membership.objects.get(user=alice).role == Role.RESEARCHER
    assert client.get(reverse("team-detail", args=["nlp"])).status_code == 404


def test_full_round_trip_time(client, entra_on):
    started = time.perf_counter()
    response = sign_in(client, "bob@example.org")
    elapsed = time.perf_counter() - started
    print(f"\nfull sign-in round trip against the emulator: {elapsed * 1000:.0f} ms")

    assert response.status_code == 302
    assert Membership.objects.get(user=_user("bob")).team == entra_on["nlp"]


def test_team_admin_from_the_app_role(client, entra_on):
    sign_in(client, "victor@example.org")

    assert Membership.objects.get(user=_user("victor")).role == Role.TEAM_ADMIN
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 200


def test_platform_admin_from_the_app_role(client, entra_on):
    sign_in(client, "pat@example.org")

    pat = _user("pat")
    assert pat.is_staff and not Membership.objects.filter(user=pat).exists()
    assert client.get(reverse("approvals")).status_code == 200
    audit = client.get(reverse("audit")).content.decode()
    assert "<td>Entra ID</td>" in audit  # Who gave the role, on the audit page.
    assert AuditEntry.objects.filter(action="entra.platform_admin", actor=None).exists()


def test_a_renamed_upn_keeps_the_account(client, entra_on, sim_server):
    sign_in(client, "alice@example.org")
    first = _user("alice")
    client.logout()
    directory = sim_server.state.entra
    directory.users[demo_oid("alice")].upn = "alice.smith@example.org"
    directory.by_upn["alice.smith@example.org"] = demo_oid("alice")

    response = sign_in(client, "alice.smith@example.org")

    assert response.status_code == 302
    again = _user("alice")
    assert again.pk == first.pk and again.username == "alice@example.org"
    assert again.profile.entra_upn == "alice.smith@example.org"
    assert User.objects.filter(username__startswith="alice.smith").count() == 0


def test_a_local_user_with_the_same_name_is_not_taken_over(client, entra_on):
    local = MembershipFactory(user__username="alice@example.org", team=entra_on["nlp"]).user

    sign_in(client, "alice@example.org")

    alice = _user("alice")
    assert alice.pk != local.pk and alice.username == "alice@example.org-2"
    assert Membership.objects.filter(user=local, team=entra_on["nlp"]).exists()


def test_membership_removed_when_the_group_is_gone_at_next_sign_in(client, entra_on, sim):
    unlinked = TeamFactory(name="Local Team", slug="local")
    sign_in(client, "alice@example.org")
    alice = _user("alice")
    MembershipFactory(user=alice, team=unlinked)  # A team admin's invite: not Entra's.
    client.logout()
    sim.entra_remove_member(VISION_LAB, "alice@example.org")

    response = sign_in(client, "alice@example.org")

    assert response.status_code == 302
    assert list(Membership.objects.filter(user=alice).values_list("team__slug", flat=True)) == [
        "local"
    ]
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 404
    removed = AuditEntry.objects.get(action="entra.membership.remove")
    assert removed.actor is None and removed.after == {"by": "Entra ID"}
    assert removed.before == {"user": "alice@example.org", "role": "researcher"}


def test_groups_overage_asks_graph(client, entra_on, sim, monkeypatch):
    sim.entra_add(groups=[{"display_name": f"g{i}", "members": ["alice"]} for i in range(3)])
    sim.entra_settings(group_limit=2)  # alice is in Vision Lab and three more: overage.
    calls = []
    real = entra_oidc.member_groups
    monkeypatch.setattr(entra_oidc, "member_groups", lambda **kw: calls.append(kw) or real(**kw))

    response = sign_in(client, "alice@example.org")

    assert response.status_code == 302
    assert calls == [{"oid": demo_oid("alice")}]
    assert Membership.objects.get(user=_user("alice")).team == entra_on["vision"]


def test_graph_down_during_overage_is_a_friendly_error(client, entra_on, sim):
    sim.entra_settings(group_limit=0)
    sim.inject("graph.memberObjects", "unavailable")

    response = sign_in(client, "alice@example.org")

    assert response.status_code == 503
    assert "Microsoft Graph could not be asked for your groups" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_disabled_user_sees_why(client, entra_on):
    response = sign_in(client, "eve@example.org")

    assert response.status_code == 400
    assert "Microsoft Entra ID refused the sign-in (AADSTS50057)" in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize(
    "query",
    [
        "",
        "code=abc",
        "state=x&code=y",
        "state=%00&code=%00",
        "state=" + "a" * 5000,
        "error=access_denied&error_description=%3Cscript%3E",
        "code=" + "%C0%AF" * 10,
    ],
)
def test_hostile_callbacks_get_400(client, entra_on, query):
    begin(client)

    response = finish(client, query)

    assert response.status_code == 400 and "Sign in with Microsoft" in response.content.decode()
    assert "<script>" not in response.content.decode()


def test_the_demo_seed_puts_the_emulators_identities_on_their_teams(client, entra_on, sim):
    # `make run`: seed_demo links Vision Lab and NLP Group to the groups the emulator's demo
    # identities are in (DEMO_GROUPS); victor holds Team.Admin, pat Platform.Admin.
    from tests.portal.test_demo import _seed

    Team.objects.all().delete()  # Only seed_demo's teams and links.
    _seed(sim, demo_quota=True)

    sign_in(client, "victor@example.org")
    client.logout()
    sign_in(client, "pat@example.org")

    victor = Membership.objects.get(user=_user("victor"))
    assert (victor.team.name, victor.role) == ("Vision Lab", Role.TEAM_ADMIN)
    assert _user("pat").is_staff


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/teams/"])
def test_after_sign_in_the_user_goes_only_to_a_page_of_the_portal(client, entra_on, target):
    authorize = client.get(reverse("entra-login"), {"next": target})["Location"]

    response = finish(client, pick(authorize, "alice@example.org"))

    expected = target if target == "/teams/" else reverse("workspaces:list")
    assert response.status_code == 302 and response["Location"] == expected


def test_an_account_deactivated_in_the_portal_stays_out(client, entra_on):
    sign_in(client, "alice@example.org")
    client.logout()
    User.objects.filter(pk=_user("alice").pk).update(is_active=False)

    response = sign_in(client, "alice@example.org")

    assert response.status_code == 400
    assert "This account is deactivated in the portal." in response.content.decode()
    assert "_auth_user_id" not in client.session
