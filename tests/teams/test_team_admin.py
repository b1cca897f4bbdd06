"""Team administration as the fixed cast sees it: members and roles, quota and budget limits,
requests for a permanent increase and their approval, the teams overview and the audit log."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.db import connections
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from common.permissions import ActionNotAllowed
from notifications.models import Notice
from teams.limits import team_limits_set
from teams.models import AuditEntry, Decision, GpuQuota, Membership, Role, Team, TeamQuotaIncrease
from tests.factories import MembershipFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db


def _as(client, user):
    client.force_login(user)
    return client


def _url(name, cast, **kwargs):
    return reverse(name, kwargs={"slug": cast.team.slug, **kwargs})


def _membership(cast, user):
    return Membership.objects.get(team=cast.team, user=user)


def _quota(team, model="A100"):
    return (
        GpuQuota.objects.filter(team=team, gpu_model=model).values_list("gpus", flat=True).first()
    )


# --- Members -------------------------------------------------------------------------------


def test_a_team_admin_adds_an_existing_account_by_username_or_email(
    client, cast, django_capture_on_commit_callbacks
):
    UserFactory(username="dave", email="Dave@Example.org")
    UserFactory(username="erin")
    _as(client, cast.team_admin)
    with django_capture_on_commit_callbacks(execute=True):
        data = {"identifier": "dave@example.org", "role": "researcher"}
        assert client.post(_url("team-invite", cast), data).status_code == 302
    client.post(_url("team-invite", cast), {"identifier": "erin", "role": "team_admin"})
    page = client.get(_url("team-detail", cast)).content.decode()
    assert "dave" in page and "erin" in page
    assert Membership.objects.get(team=cast.team, user__username="erin").role == Role.TEAM_ADMIN
    assert Membership.objects.get(team=cast.team, user__username="dave").role == Role.RESEARCHER
    entry = AuditEntry.objects.filter(action="membership.add").last()
    assert entry.actor == cast.team_admin and entry.team == cast.team
    assert entry.after == {"user": "dave", "role": "researcher"}
    assert Notice.objects.filter(user__username="dave", text__contains="Vision Lab").exists()


def test_adding_the_same_person_twice_is_a_form_error(client, cast):
    _as(client, cast.team_admin)
    data = {"identifier": "alice", "role": "researcher"}
    page = client.post(_url("team-invite", cast), data).content.decode()
    assert "alice is already a member of Vision Lab" in page


@pytest.mark.parametrize("identifier", ["nobody", "nobody@example.org", ""])
def test_an_unknown_username_or_email_is_a_form_error(client, cast, identifier):
    _as(client, cast.team_admin)
    data = {"identifier": identifier, "role": "researcher"}
    response = client.post(_url("team-invite", cast), data)
    assert response.status_code == 200
    assert 'class="invalid-feedback' in response.content.decode()
    assert Membership.objects.filter(team=cast.team).count() == 3
    # An invite naming no account is audited (see below); an empty form never looks.
    refused = AuditEntry.objects.filter(action="membership.invite_refused").count()
    assert refused == (1 if identifier else 0)
    assert not AuditEntry.objects.exclude(action="membership.invite_refused").exists()


def test_adding_by_htmx_answers_with_the_members_section(client, cast):
    UserFactory(username="dave")
    _as(client, cast.team_admin)
    response = client.post(
        _url("team-invite", cast),
        {"identifier": "dave", "role": "team_admin"},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert response.status_code == 200 and 'id="members"' in body and "<html" not in body
    assert "dave" in body


def test_a_team_admin_changes_a_role_and_it_is_audited(client, cast):
    _as(client, cast.team_admin)
    pk = _membership(cast, cast.researcher).pk
    client.post(_url("team-member-role", cast, pk=pk), {"role": "team_admin"})
    assert _membership(cast, cast.researcher).role == Role.TEAM_ADMIN
    entry = AuditEntry.objects.get(action="membership.role")
    assert entry.before == {"user": "alice", "role": "researcher"}
    assert entry.after == {"user": "alice", "role": "team_admin"}


def test_the_last_team_admin_cannot_be_demoted_or_removed(client, cast):
    _as(client, cast.team_admin)
    pk = _membership(cast, cast.team_admin).pk
    demote = client.post(_url("team-member-role", cast, pk=pk), {"role": "researcher"})
    remove = client.post(_url("team-member-remove", cast, pk=pk))
    for response in (demote, remove):
        assert response.status_code == 200
        assert "victor is the last team admin of Vision Lab" in response.content.decode()
    assert _membership(cast, cast.team_admin).role == Role.TEAM_ADMIN
    assert not AuditEntry.objects.exists()


def test_a_team_admin_can_step_down_once_there_is_another(client, cast):
    _as(client, cast.team_admin)
    client.post(
        _url("team-member-role", cast, pk=_membership(cast, cast.researcher).pk),
        {"role": "team_admin"},
    )
    client.post(_url("team-member-remove", cast, pk=_membership(cast, cast.team_admin).pk))
    assert not Membership.objects.filter(team=cast.team, user=cast.team_admin).exists()
    assert AuditEntry.objects.filter(action="membership.remove").get().before["user"] == "victor"


def test_a_team_admin_removes_a_member(client, cast):
    _as(client, cast.team_admin)
    client.post(_url("team-member-remove", cast, pk=_membership(cast, cast.teammate).pk))
    assert not Membership.objects.filter(team=cast.team, user=cast.teammate).exists()
    assert _as(client, cast.teammate).get(_url("team-detail", cast)).status_code == 404


def test_there_is_no_way_to_become_platform_admin_from_the_team_page(client, cast):
    _as(client, cast.team_admin)
    page = client.get(_url("team-detail", cast)).content.decode()
    assert "Platform admin</option>" not in page and "is_staff" not in page
    pk = _membership(cast, cast.team_admin).pk
    response = client.post(_url("team-member-role", cast, pk=pk), {"role": "platform_admin"})
    assert response.status_code == 200 and "Choose a role" in response.content.decode()
    cast.team_admin.refresh_from_db()
    assert not cast.team_admin.is_staff


def test_a_member_of_another_team_cannot_be_changed_through_this_team(client, cast):
    _as(client, cast.team_admin)
    nlp_member = Membership.objects.get(team=cast.other_team, user=cast.outsider)
    response = client.post(_url("team-member-remove", cast, pk=nlp_member.pk))
    assert "not a member of this team" in response.content.decode()
    assert Membership.objects.filter(pk=nlp_member.pk).exists()


def test_researchers_see_the_team_read_only(client, cast):
    _as(client, cast.researcher)
    page = client.get(_url("team-detail", cast)).content.decode()
    assert "victor" in page and "carol" in page and "A100" in page
    assert "Add member" not in page and "Remove" not in page and "Ask the platform" not in page
    data = {"identifier": "bob", "role": "team_admin"}
    assert client.post(_url("team-invite", cast), data).status_code == 403
    pk = _membership(cast, cast.researcher).pk
    assert (
        client.post(_url("team-member-role", cast, pk=pk), {"role": "team_admin"}).status_code
        == 403
    )
    assert _membership(cast, cast.researcher).role == Role.RESEARCHER


@pytest.mark.parametrize("who", ["outsider", "other_team_admin"])
def test_people_of_another_team_get_404_everywhere_in_this_team(client, cast, who):
    _as(client, getattr(cast, who))
    pk = _membership(cast, cast.researcher).pk
    assert client.get(_url("team-detail", cast)).status_code == 404
    assert client.post(_url("team-invite", cast), {"identifier": "bob"}).status_code == 404
    assert client.post(_url("team-member-remove", cast, pk=pk)).status_code == 404
    assert client.post(_url("team-quota", cast), {"gpus_A100": 99}).status_code == 404
    assert client.post(_url("team-increase", cast), {"gpus": 9}).status_code == 404
    assert Membership.objects.filter(pk=pk).exists() and _quota(cast.team) == 4


# --- Probing for accounts through the invite form ------------------------------------------
# A team admin's invite must tell "no such account" from "added", or the form is useless; what
# it tells is the same for an unknown, an inactive and an ambiguous account, each such answer is
# audited, and more than TEAM_INVITE_MISSES_PER_HOUR of them pause the admin's invites for up to
# an hour. Everyone else gets 403 or 404 before any account is looked up.


def _without_csrf_token(body: str) -> str:
    """The page without its CSRF tokens, which differ on every render, nor the live stream's
    signed subscription and stamp version (static/live.js), which change with the second and
    with every change of the topics the page shows (the audit entry of the last try)."""
    body = re.sub(r'"X-CSRFToken": "[^"]*"', "", body)
    body = re.sub(r'<div id="live-config"[^>]*>', "", body)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", body)


@pytest.mark.parametrize(
    ("who", "status"),
    [("researcher", 403), ("teammate", 403), ("outsider", 404), ("other_team_admin", 404)],
)
def test_no_one_but_an_admin_learns_from_the_invite_url_whether_an_account_exists(
    client, cast, who, status
):
    UserFactory(username="dave")
    _as(client, getattr(cast, who))
    answers = [
        client.post(_url("team-invite", cast), {"identifier": name, "role": "researcher"})
        for name in ("dave", "no-such-account")
    ]
    assert [a.status_code for a in answers] == [status, status]
    bodies = {_without_csrf_token(a.content.decode()) for a in answers}
    assert len(bodies) == 1
    assert not AuditEntry.objects.exists()
    assert not Membership.objects.filter(user__username="dave").exists()


def test_an_invite_naming_no_account_says_the_same_whatever_the_reason_and_is_audited(client, cast):
    UserFactory(username="ivan", is_active=False)
    UserFactory(username="twin1", email="twin@example.org")
    UserFactory(username="twin2", email="twin@example.org")
    _as(client, cast.team_admin)
    pages = {}
    for identifier in ("nobody", "ivan", "twin@example.org"):
        data = {"identifier": identifier, "role": "researcher"}
        response = client.post(_url("team-invite", cast), data)
        assert response.status_code == 200
        pages[identifier] = _without_csrf_token(response.content.decode()).replace(identifier, "?")
    assert len(set(pages.values())) == 1
    assert "No account can be added as" in pages["nobody"]
    entries = AuditEntry.objects.filter(action="membership.invite_refused").order_by("id")
    assert [e.after["identifier"] for e in entries] == ["nobody", "ivan", "twin@example.org"]
    assert {(e.actor, e.team) for e in entries} == {(cast.team_admin, cast.team)}


def test_an_admin_who_keeps_naming_no_account_is_paused_for_an_hour(client, cast, settings):
    settings.TEAM_INVITE_MISSES_PER_HOUR = 10
    UserFactory(username="dave")
    _as(client, cast.team_admin)
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for n in range(10):
            client.post(
                _url("team-invite", cast), {"identifier": f"guess{n}", "role": "researcher"}
            )
        data = {"identifier": "dave", "role": "researcher"}
        paused = client.post(_url("team-invite", cast), data)
        # The same answer for an existing account as for another guess: nothing is looked up.
        again = client.post(
            _url("team-invite", cast), {"identifier": "guess11", "role": "researcher"}
        )
        assert paused.status_code == again.status_code == 429
        assert "Too many invites named no account" in paused.content.decode()
        assert not Membership.objects.filter(team=cast.team, user__username="dave").exists()
        assert AuditEntry.objects.filter(action="membership.invite_refused").count() == 10
        # Another team admin is not paused by it.
        _as(client, cast.other_team_admin)
        other = reverse("team-invite", kwargs={"slug": cast.other_team.slug})
        assert client.post(other, data).status_code == 302
        clock.shift(timedelta(hours=1, seconds=1))
        _as(client, cast.team_admin)
        assert client.post(_url("team-invite", cast), data).status_code == 302
    assert Membership.objects.filter(team=cast.team, user__username="dave").exists()


# --- Quota and budget ------------------------------------------------------------------------


def _limits(**overrides):
    data = {"gpus_A100": "16", "gpus_T4": "8", "monthly_budget": "25000.50"}
    data["max_workspaces_per_user"] = "5"
    return {**data, **overrides}


def test_a_team_admin_cannot_raise_their_own_quota(client, cast):
    _as(client, cast.team_admin)
    assert client.get(_url("team-quota", cast)).status_code == 403
    assert client.post(_url("team-quota", cast), _limits()).status_code == 403
    assert _quota(cast.team) == 4 and not AuditEntry.objects.exists()
    assert "Set limits" not in client.get(_url("team-detail", cast)).content.decode()


def test_a_platform_admin_sets_quotas_budget_and_cap_and_it_is_audited(client, cast):
    _as(client, cast.platform_admin)
    form = client.get(_url("team-quota", cast)).content.decode()
    assert 'name="gpus_A100" value="4"' in form
    response = client.post(_url("team-quota", cast), _limits(gpus_H100="2"))
    assert response.status_code == 302
    team = Team.objects.get(pk=cast.team.pk)
    assert _quota(team) == 16 and _quota(team, "H100") == 2
    assert team.monthly_budget == Decimal("25000.50") and team.max_workspaces_per_user == 5
    entry = AuditEntry.objects.get(action="team.limits")
    assert entry.actor == cast.platform_admin and entry.team == cast.team
    assert entry.before["gpu_quotas"] == {"A100": 4, "T4": 8}
    assert entry.after["gpu_quotas"] == {"A100": 16, "H100": 2, "T4": 8}
    assert entry.before["monthly_budget"] is None and entry.after["monthly_budget"] == "25000.50"
    overview = client.get(reverse("team-list")).content.decode()
    assert "0 / 16 A100" in overview and "$25,000.50" in overview


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("gpus_A100", "-1", "greater than or equal to 0"),
        ("gpus_A100", "10001", "less than or equal to 10000"),
        ("gpus_T4", "lots", "Enter a whole number"),
        ("monthly_budget", "abc", "Enter a number"),
        ("monthly_budget", "NaN", "Enter a number"),
        ("monthly_budget", "-5", "greater than or equal to 0"),
        ("gpus_Z80", "4", "Unknown GPU model: Z80"),
        ("max_workspaces_per_user", "", "This field is required"),
    ],
)
def test_bad_limits_are_form_errors_and_change_nothing(client, cast, field, value, message):
    _as(client, cast.platform_admin)
    response = client.post(_url("team-quota", cast), _limits(**{field: value}))
    assert response.status_code == 200 and message in response.content.decode()
    assert _quota(cast.team) == 4 and Team.objects.get(pk=cast.team.pk).monthly_budget is None
    assert not AuditEntry.objects.exists()


def test_saving_unchanged_limits_writes_no_audit_row(client, cast):
    _as(client, cast.platform_admin)
    data = _limits(gpus_A100="4", monthly_budget="", max_workspaces_per_user="3")
    client.post(_url("team-quota", cast), data)
    assert not AuditEntry.objects.exists()


def test_the_teams_overview_makes_the_same_number_of_queries_for_2_and_40_teams(client, cast):
    _as(client, cast.platform_admin)
    counts = []
    for total in (2, 40):
        for i in range(Team.objects.count(), total):
            team = TeamFactory()
            MembershipFactory(team=team)
            GpuQuota.objects.create(team=team, gpu_model="A100", gpus=i)
            TeamQuotaIncrease.objects.create(
                team=team,
                requester=cast.outsider,
                gpu_model="T4",
                gpus=2,
                justification="x",
                created_at=timezone.now(),
            )
        with CaptureQueriesContext(connections["default"]) as queries:
            assert client.get(reverse("team-list")).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_members_see_only_their_own_teams_in_the_overview(client, cast):
    page = _as(client, cast.researcher).get(reverse("team-list")).content.decode()
    assert "Vision Lab" in page and "NLP" not in page and "Set limits" not in page


# --- Increase requests ---------------------------------------------------------------------


def _ask(client, cast, **overrides):
    data = {"gpu_model": "A100", "gpus": "12", "monthly_budget": "", "justification": "New grant"}
    return _as(client, cast.team_admin).post(_url("team-increase", cast), {**data, **overrides})


def test_a_team_admin_asks_for_more_and_platform_admins_see_it(
    client, cast, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = _ask(client, cast, monthly_budget="9000")
    assert response.status_code == 302
    increase = TeamQuotaIncrease.objects.get()
    assert increase.decision == Decision.PENDING and increase.gpus == 12
    assert Notice.objects.filter(user=cast.platform_admin, text__contains="12 A100").exists()
    assert any(m.to == ["pat@example.org"] for m in mail.outbox)
    assert "Waiting for a platform admin" in client.get(_url("team-detail", cast)).content.decode()
    queue = _as(client, cast.platform_admin).get(reverse("approvals")).content.decode()
    assert "New grant" in queue and "0 / 4 A100" in queue and "$9,000.00/month" in queue
    assert _quota(cast.team) == 4  # nothing changes before a decision


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"gpu_model": "", "gpus": ""}, "Ask for GPUs of a model, a monthly budget, or both"),
        ({"gpu_model": "Z80"}, "Select a valid choice"),
        ({"gpus": "-3"}, "greater than or equal to 0"),
        ({"gpus": "10001"}, "less than or equal to 10000"),
        ({"gpu_model": ""}, "Give both a GPU model and a number of GPUs"),
        ({"monthly_budget": "a lot"}, "Enter a number"),
        ({"justification": ""}, "This field is required"),
    ],
)
def test_bad_increase_requests_are_form_errors(client, cast, overrides, message):
    response = _ask(client, cast, **overrides)
    assert response.status_code == 200 and message in response.content.decode()
    assert not TeamQuotaIncrease.objects.exists()


def test_researchers_cannot_ask_for_an_increase(client, cast):
    data = {"gpu_model": "A100", "gpus": "12", "justification": "x"}
    assert _as(client, cast.researcher).post(_url("team-increase", cast), data).status_code == 403


def test_approving_an_increase_applies_it_audits_and_tells_the_team_admin(
    client, cast, django_capture_on_commit_callbacks
):
    _ask(client, cast, monthly_budget="9000")
    increase = TeamQuotaIncrease.objects.get()
    url = reverse("increase-decide", kwargs={"pk": increase.pk, "decision": "approve"})
    with django_capture_on_commit_callbacks(execute=True):
        body = (
            _as(client, cast.platform_admin)
            .post(url, {"comment": "granted"}, HTTP_HX_REQUEST="true")
            .content.decode()
        )
    assert "Approved" in body and "granted" in body and "<html" not in body
    team = Team.objects.get(pk=cast.team.pk)
    assert _quota(team) == 12 and _quota(team, "T4") == 8
    assert team.monthly_budget == Decimal("9000.00")
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"quota_increase.open", "quota_increase.approved", "team.limits"} <= actions
    assert Notice.objects.filter(user=cast.team_admin, text__contains="approved").exists()
    again = client.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert "already approved by pat" in again


def test_rejecting_an_increase_changes_nothing(client, cast, django_capture_on_commit_callbacks):
    _ask(client, cast)
    increase = TeamQuotaIncrease.objects.get()
    url = reverse("increase-decide", kwargs={"pk": increase.pk, "decision": "reject"})
    with django_capture_on_commit_callbacks(execute=True):
        response = _as(client, cast.platform_admin).post(url, {"comment": "no"})
    assert response.status_code == 302
    assert _quota(cast.team) == 4
    assert TeamQuotaIncrease.objects.get().decision == Decision.REJECTED
    assert Notice.objects.filter(user=cast.team_admin, text__contains="rejected").exists()


@pytest.mark.parametrize("who,expected", [("team_admin", 403), ("other_team_admin", 404)])
def test_team_admins_cannot_decide_increases(client, cast, who, expected):
    _ask(client, cast)
    increase = TeamQuotaIncrease.objects.get()
    url = reverse("increase-decide", kwargs={"pk": increase.pk, "decision": "approve"})
    assert _as(client, getattr(cast, who)).post(url).status_code == expected
    assert _quota(cast.team) == 4


# --- Audit log -----------------------------------------------------------------------------


def _audit_rows(cast, count, team=None, actor=None, action="team.limits"):
    now = timezone.now()
    AuditEntry.objects.bulk_create(
        [
            AuditEntry(
                at=now - timedelta(minutes=i),
                actor=actor or cast.platform_admin,
                team=team or cast.team,
                action=action,
                object_type="teams.Team",
                object_id=str((team or cast.team).pk),
            )
            for i in range(count)
        ]
    )


def test_platform_admins_read_and_filter_the_whole_audit_log(client, cast):
    _audit_rows(cast, 3)
    _audit_rows(cast, 2, team=cast.other_team, actor=cast.other_team_admin, action="membership.add")
    _as(client, cast.platform_admin)
    assert len(client.get(reverse("audit")).context["page"].rows) == 5
    by_team = client.get(reverse("audit"), {"team": "nlp"}).context["page"].rows
    by_actor = client.get(reverse("audit"), {"actor": "pat"}).context["page"].rows
    by_action = client.get(reverse("audit"), {"action": "membership.add"})
    assert (len(by_team), len(by_actor), len(by_action.context["page"].rows)) == (2, 3, 2)
    assert "nora" in by_action.content.decode()


def test_team_admins_read_only_their_teams_audit_rows(client, cast):
    _audit_rows(cast, 3)
    _audit_rows(cast, 2, team=cast.other_team, actor=cast.other_team_admin)
    page = _as(client, cast.team_admin).get(reverse("audit"))
    assert len(page.context["page"].rows) == 3
    assert "NLP" not in page.content.decode()
    other = client.get(reverse("audit"), {"team": "nlp"})
    assert other.context["page"].rows == []


def test_researchers_may_not_read_the_audit_log(client, cast):
    assert _as(client, cast.researcher).get(reverse("audit")).status_code == 403
    assert "Audit log" not in client.get(_url("team-detail", cast)).content.decode()


def test_the_audit_log_is_paged_by_50_newest_first_with_an_older_link(client, cast):
    _audit_rows(cast, 120)
    _as(client, cast.platform_admin)
    seen, query = [], {"team": "vision"}
    while True:
        response = client.get(reverse("audit"), query)
        rows = response.context["page"].rows
        seen += [(e.at, e.pk) for e in rows]
        html = response.content.decode()
        older = re.search(r'rel="next" href="\?([^"]+)"', html)
        if not older:
            break
        assert "team=vision" in older.group(1)
        query = QueryDict(older.group(1).replace("&amp;", "&"))
    assert [len(seen), len(set(seen))] == [120, 120]
    assert seen == sorted(seen, reverse=True)  # newest first
    assert client.get(reverse("audit"), {"cursor": "abc"}).status_code == 200


def test_services_refuse_an_actor_without_the_permission(cast):
    with pytest.raises(ActionNotAllowed):
        team_limits_set(
            actor=cast.team_admin,
            team=cast.team,
            gpu_quotas={"A100": 100},
            monthly_budget=None,
            max_workspaces_per_user=3,
            now=timezone.now(),
        )
    assert _quota(cast.team) == 4
