"""Link a group: a team admin binds the team to an Entra ID security group checked through
Graph; refusals are form errors; the link is audited; a linked team's Entra ID members follow
the group, so the team page refuses to invite, re-role or remove them."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from cloudsim.entra.directory import NLP_GROUP, VISION_LAB, demo_oid
from teams.models import AuditEntry, Membership, Role, Team
from tests.entra_portal import entra_on_fixture, sign_in  # noqa: F401
from tests.factories import MembershipFactory, TeamFactory, UserFactory

User = get_user_model()


@pytest.fixture
def robotics(entra_on, sim):
    """An unlinked team with a local team admin, and a new Entra ID security group whose only
    member is alice. Returns (team, its admin, the group id)."""
    team = TeamFactory(name="Robotics", slug="robotics")
    admin = MembershipFactory(team=team, user=UserFactory(username="rita"), role=Role.TEAM_ADMIN)
    added = sim.entra_add(groups=[{"display_name": "Robotics Lab", "members": ["alice"]}])
    return team, admin.user, added["groups"][0]["id"]


def _link(client, team, group_id, headers=None, **extra):
    data = {"group_id": group_id, **extra}
    return client.post(reverse("team-group", args=[team.slug]), data, headers=headers)


def test_a_team_admin_links_a_security_group_and_its_members_join_at_sign_in(client, robotics):
    team, admin, gid = robotics
    client.force_login(admin)

    response = _link(client, team, gid.upper())  # Entra shows ids in any case.

    assert response.status_code == 302
    team.refresh_from_db()
    assert (str(team.entra_group_id), team.entra_group_name) == (gid, "Robotics Lab")
    page = client.get(reverse("team-detail", args=[team.slug])).content.decode()
    assert "Robotics Lab" in page and gid in page
    entry = AuditEntry.objects.get(action="team.group_link")
    assert (entry.actor, entry.before, entry.after) == (
        admin,
        {"group": None, "group_name": ""},
        {"group": gid, "group_name": "Robotics Lab"},
    )
    client.logout()
    sign_in(client, "alice@example.org")
    alice = User.objects.get(profile__signin_object_id=demo_oid("alice"))
    assert set(Membership.objects.filter(user=alice).values_list("team__slug", flat=True)) == {
        "vision",
        "robotics",
    }


@pytest.mark.parametrize(
    ("group_id", "error"),
    [
        ("9d3f1c2b-0000-4000-8000-000000000000", "Entra ID has no group"),
        (VISION_LAB, "linked to Vision Lab already"),
        ("not-a-guid'--", "An object id looks like"),
        ("", "Enter the group"),
    ],
    ids=["unknown", "taken", "not-a-uuid", "empty"],
)
def test_a_group_that_cannot_be_linked_is_a_form_error(client, robotics, group_id, error):
    team, admin, _ = robotics
    client.force_login(admin)

    response = _link(client, team, group_id)

    assert response.status_code == 400
    assert error in response.content.decode()
    assert Team.objects.get(pk=team.pk).entra_group_id is None
    assert not AuditEntry.objects.filter(action="team.group_link").exists()


def test_a_microsoft_365_group_is_refused(client, robotics, sim):
    team, admin, _ = robotics
    m365 = sim.entra_add(groups=[{"display_name": "Lunch", "security_enabled": False}])
    client.force_login(admin)

    response = _link(client, team, m365["groups"][0]["id"], headers={"HX-Request": "true"})

    assert response.status_code == 200  # htmx swaps the section with its error.
    assert "Lunch is not a security group" in response.content.decode()
    assert Team.objects.get(pk=team.pk).entra_group_id is None


def test_graph_down_is_a_form_error_not_a_500(client, robotics, sim):
    team, admin, gid = robotics
    sim.inject("graph.groups.get", "server_error")
    client.force_login(admin)

    response = _link(client, team, gid)

    assert response.status_code == 400
    assert "Microsoft Graph did not answer" in response.content.decode()


def test_unlink_is_audited_and_a_researcher_may_not(client, entra_on):
    vision = entra_on["vision"]
    researcher = MembershipFactory(team=vision).user
    admin = MembershipFactory(team=vision, role=Role.TEAM_ADMIN).user
    client.force_login(researcher)
    assert _link(client, vision, "", unlink="1").status_code == 403

    client.force_login(admin)
    response = _link(client, vision, "", unlink="1")

    assert response.status_code == 302
    assert Team.objects.get(pk=vision.pk).entra_group_id is None
    entry = AuditEntry.objects.get(action="team.group_link")
    assert entry.before == {"group": VISION_LAB, "group_name": "Vision Lab"}
    assert entry.after == {"group": None, "group_name": ""}


def test_without_entra_sign_in_there_is_no_link_form(client, cast, settings):
    settings.ENTRA_TENANT_ID = settings.ENTRA_CLIENT_ID = ""
    client.force_login(cast.team_admin)

    page = client.get(reverse("team-detail", args=[cast.team.slug])).content.decode()

    assert "Link a group" not in page and "Entra ID group" not in page
    assert _link(client, cast.team, NLP_GROUP).status_code == 404


def test_a_linked_teams_entra_members_follow_the_group(client, entra_on):
    vision = entra_on["vision"]
    sign_in(client, "alice@example.org")
    client.logout()
    alice = Membership.objects.get(team=vision, user__profile__signin_object_id=demo_oid("alice"))
    local = MembershipFactory(team=vision, user=UserFactory(username="lou"))
    admin = MembershipFactory(team=vision, role=Role.TEAM_ADMIN).user
    UserFactory(username="bob-local")
    client.force_login(admin)
    url = reverse("team-detail", args=["vision"])

    page = client.get(url).content.decode()
    role = client.post(
        reverse("team-member-role", args=["vision", alice.pk]), {"role": "team_admin"}
    )
    removed = client.post(reverse("team-member-remove", args=["vision", alice.pk]))
    invited = client.post(
        reverse("team-invite", args=["vision"]), {"identifier": "bob-local", "role": "researcher"}
    )
    local_removed = client.post(reverse("team-member-remove", args=["vision", local.pk]))

    assert "From the Entra ID group" in page and "Add a local account" in page
    assert "change their role in Entra ID" in role.content.decode()
    assert "remove them from the group in Entra ID" in removed.content.decode()
    assert Membership.objects.get(pk=alice.pk).role == Role.RESEARCHER
    assert invited.status_code == 302 and local_removed.status_code == 302
    assert not Membership.objects.filter(pk=local.pk).exists()


def test_inviting_an_entra_account_into_a_linked_team_is_refused(client, entra_on):
    sign_in(client, "bob@example.org")  # NLP Group's member: has an Entra ID account.
    client.logout()
    admin = MembershipFactory(team=entra_on["vision"], role=Role.TEAM_ADMIN).user
    client.force_login(admin)

    response = client.post(
        reverse("team-invite", args=["vision"]),
        {"identifier": "bob@example.org", "role": "researcher"},
    )

    assert "add them to the group in Entra ID" in response.content.decode()
    assert not Membership.objects.filter(team=entra_on["vision"], user__username="bob@example.org")


def test_sign_in_reads_the_linked_teams_in_one_query(entra_on, django_assert_num_queries):
    from teams.entra import _linked_teams

    TeamFactory(name="Unlinked", slug="unlinked")
    with django_assert_num_queries(1):
        linked = _linked_teams()

    assert {pk: groups for pk, (_, groups) in linked.items()} == {
        entra_on["vision"].pk: {VISION_LAB},
        entra_on["nlp"].pk: {NLP_GROUP},
    }
