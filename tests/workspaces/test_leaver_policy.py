"""The leaver policy: what happens to a member's workspaces in a team when they leave it (a team
admin's removal, Entra ID's removal or deactivation), set per team by its team admins."""

import pytest
from django.urls import reverse
from django.utils import timezone

from cloudsim.entra.directory import VISION_LAB, demo_oid
from common.hooks import Callbacks
from notifications.models import Notice, NoticeKind
from teams import hooks
from teams.entra_sync import entra_sync
from teams.hooks import LeaveReason
from teams.models import AuditEntry, LeaverPolicy, Membership, Team
from tests.entra_portal import entra_on_fixture, sign_in  # noqa: F401
from tests.factories import MembershipFactory, TeamFactory, UserFactory, WorkspaceFactory
from workspaces import states
from workspaces.leavers import leaver_workspaces_apply
from workspaces.models import Workspace
from workspaces.states import Status

RUN = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]


def _workspace(team, owner, path=RUN, name="train"):
    ws = WorkspaceFactory(team=team, owner=owner, name=name)
    for expected, to in zip(path, path[1:], strict=False):
        assert states.transition(workspace_id=ws.pk, expected=expected, to=to, now=timezone.now())
    return ws


def _policy(team, policy):
    Team.objects.filter(pk=team.pk).update(leaver_policy=policy)


def _after_commit(django_capture_on_commit_callbacks, action):
    """Run ``action`` and then what it left for after its commit (the member-left callbacks),
    without the Stop tasks those queue in turn: those would call Azure (they are
    test_budget_alerts' and test_workspace_flow's subject)."""
    with django_capture_on_commit_callbacks() as callbacks:
        result = action()
    for callback in callbacks:
        callback()
    return result


def _remove(client, cast, user):
    membership = Membership.objects.get(team=cast.team, user=user)
    client.force_login(cast.team_admin)
    url = reverse("team-member-remove", args=[cast.team.slug, membership.pk])
    return client.post(url)


def _status(ws):
    return Workspace.objects.get(pk=ws.pk).status


@pytest.mark.django_db
def test_stop_the_default_stops_the_leavers_running_workspaces(
    client, cast, django_capture_on_commit_callbacks
):
    assert Team.objects.get(pk=cast.team.pk).leaver_policy == LeaverPolicy.STOP
    running = _workspace(cast.team, cast.researcher)
    parked = _workspace(cast.team, cast.researcher, [*RUN, Status.STOPPING], name="parked")
    elsewhere = _workspace(cast.other_team, cast.researcher, name="elsewhere")
    teammates = _workspace(cast.team, cast.teammate, name="teammates")

    _after_commit(
        django_capture_on_commit_callbacks, lambda: _remove(client, cast, cast.researcher)
    )

    assert _status(running) == Status.STOPPING
    event = running.events.get(to_status=Status.STOPPING)
    assert event.actor is None and event.detail["rule"] == "leaver"
    assert "alice left Vision Lab (removed from the team by a team admin)" in event.reason
    assert parked.events.filter(to_status=Status.STOPPING).count() == 1  # its own stop only
    assert _status(elsewhere) == _status(teammates) == Status.RUNNING
    notice = Notice.objects.get(user=cast.researcher, kind=NoticeKind.AUTO_STOP)
    assert "train was stopped automatically" in notice.text and "left Vision Lab" in notice.text


@pytest.mark.django_db
def test_keep_leaves_them_running(client, cast, django_capture_on_commit_callbacks):
    _policy(cast.team, LeaverPolicy.KEEP)
    running = _workspace(cast.team, cast.researcher)

    _after_commit(
        django_capture_on_commit_callbacks, lambda: _remove(client, cast, cast.researcher)
    )

    assert _status(running) == Status.RUNNING
    assert Workspace.objects.get(pk=running.pk).owner == cast.researcher


@pytest.mark.django_db
def test_hand_over_gives_them_to_the_longest_standing_team_admin(
    client, cast, django_capture_on_commit_callbacks
):
    _policy(cast.team, LeaverPolicy.HAND_OVER)
    later_admin = MembershipFactory(team=cast.team, role="team_admin").user
    running = _workspace(cast.team, cast.researcher)
    parked = _workspace(cast.team, cast.researcher, [*RUN, Status.STOPPING], name="parked")

    _after_commit(
        django_capture_on_commit_callbacks, lambda: _remove(client, cast, cast.researcher)
    )

    for ws in (running, parked):
        ws.refresh_from_db()
        assert ws.owner == cast.team_admin != later_admin
    assert _status(running) == Status.RUNNING
    audit = AuditEntry.objects.get(action="workspace.hand_over", object_id=str(running.pk))
    assert audit.actor is None and audit.before["owner"] == "alice"
    assert audit.after["owner"] == "victor"
    notice = Notice.objects.filter(user=cast.team_admin, text__contains="is yours now").first()
    assert "train is yours now" in notice.text and "SSH key" in notice.text
    client.force_login(cast.team_admin)
    page = client.get(reverse("workspaces:detail", args=[running.pk]))
    assert page.status_code == 200


@pytest.mark.django_db
def test_hand_over_without_a_team_admin_stops_them(
    client, cast, django_capture_on_commit_callbacks
):
    team = TeamFactory(name="Solo", slug="solo", leaver_policy=LeaverPolicy.HAND_OVER)
    leaver = MembershipFactory(team=team).user
    running = _workspace(team, leaver)
    client.force_login(cast.platform_admin)
    membership = Membership.objects.get(team=team, user=leaver)
    url = reverse("team-member-remove", args=[team.slug, membership.pk])

    _after_commit(django_capture_on_commit_callbacks, lambda: client.post(url))

    assert _status(running) == Status.STOPPING
    assert Workspace.objects.get(pk=running.pk).owner == leaver
    assert not AuditEntry.objects.filter(action="workspace.hand_over").exists()


@pytest.mark.django_db
def test_a_workspace_starting_at_the_leave_is_stopped_at_the_recheck(cast):
    starting = _workspace(cast.team, cast.researcher, RUN[:2])
    Membership.objects.filter(user=cast.researcher, team=cast.team).delete()
    reason = LeaveReason.REMOVED_BY_ADMIN

    first = leaver_workspaces_apply(
        team_id=cast.team.pk, user_id=cast.researcher.pk, reason=reason, now=timezone.now()
    )
    assert first.stopped == [] and first.in_flight == [starting.pk]
    states.transition(
        workspace_id=starting.pk,
        expected=Status.PROVISIONING,
        to=Status.RUNNING,
        now=timezone.now(),
    )
    again = leaver_workspaces_apply(
        team_id=cast.team.pk,
        user_id=cast.researcher.pk,
        reason=reason,
        now=timezone.now(),
        recheck=False,
    )
    assert again.stopped == [starting.pk] and _status(starting) == Status.STOPPING


@pytest.mark.django_db
def test_a_member_again_is_left_alone(cast):
    running = _workspace(cast.team, cast.researcher)
    outcome = leaver_workspaces_apply(
        team_id=cast.team.pk,
        user_id=cast.researcher.pk,
        reason=LeaveReason.REMOVED_BY_ENTRA,
        now=timezone.now(),
    )
    assert outcome.stopped == [] and _status(running) == Status.RUNNING


def test_entra_sync_removal_and_deactivation_stop_workspaces(
    client, entra_on, sim, django_capture_on_commit_callbacks
):
    assert sign_in(client, "alice@example.org").status_code == 302
    assert sign_in(client, "bob@example.org").status_code == 302
    alice = UserFactory._meta.model.objects.get(profile__signin_object_id=demo_oid("alice"))
    bob = UserFactory._meta.model.objects.get(profile__signin_object_id=demo_oid("bob"))
    alices, bobs = _workspace(entra_on["vision"], alice), _workspace(entra_on["nlp"], bob)
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    sim.entra_disable_user("bob@example.org")

    result = _after_commit(
        django_capture_on_commit_callbacks, lambda: entra_sync(now=timezone.now())
    )

    assert result.members_removed == 1 and result.users_deactivated == 1
    assert _status(alices) == _status(bobs) == Status.STOPPING
    reasons = {ws.pk: ws.events.get(to_status=Status.STOPPING).reason for ws in (alices, bobs)}
    assert "no longer in the team's Entra ID group" in reasons[alices.pk]
    assert "disabled or deleted in Entra ID" in reasons[bobs.pk]


# --- setting it ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_team_admin_sets_it_on_the_team_page_audited(client, cast):
    client.force_login(cast.team_admin)
    page = client.get(reverse("team-detail", args=[cast.team.slug])).content.decode()
    assert "When a member leaves" in page and 'data-leaver-policy="stop"' in page
    url = reverse("team-leaver-policy", args=[cast.team.slug])

    response = client.post(url, {"leaver_policy": "hand_over"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert 'data-leaver-policy="hand_over"' in response.content.decode()
    assert Team.objects.get(pk=cast.team.pk).leaver_policy == LeaverPolicy.HAND_OVER
    audit = AuditEntry.objects.get(action="team.leaver_policy")
    assert audit.actor == cast.team_admin
    assert (audit.before, audit.after) == (
        {"leaver_policy": "stop"},
        {"leaver_policy": "hand_over"},
    )
    response = client.post(url, {"leaver_policy": "keep"})
    assert response.status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize("who,status", [("researcher", 403), ("outsider", 404)])
def test_others_may_not_set_it(client, cast, who, status):
    client.force_login(getattr(cast, who))
    url = reverse("team-leaver-policy", args=[cast.team.slug])

    assert client.post(url, {"leaver_policy": "keep"}).status_code == status
    assert Team.objects.get(pk=cast.team.pk).leaver_policy == LeaverPolicy.STOP


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["", "delete", "x" * 5000, "stop\x00"])
def test_a_bad_value_is_a_form_error(client, cast, value):
    client.force_login(cast.team_admin)
    url = reverse("team-leaver-policy", args=[cast.team.slug])

    response = client.post(url, {"leaver_policy": value})

    assert response.status_code == 400 and "invalid-feedback" in response.content.decode()
    assert Team.objects.get(pk=cast.team.pk).leaver_policy == LeaverPolicy.STOP


def test_a_removal_at_sign_in_applies_the_policy_too(
    client, entra_on, sim, django_capture_on_commit_callbacks
):
    assert sign_in(client, "alice@example.org").status_code == 302
    alice = UserFactory._meta.model.objects.get(profile__signin_object_id=demo_oid("alice"))
    running = _workspace(entra_on["vision"], alice)
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    client.logout()

    response = _after_commit(
        django_capture_on_commit_callbacks, lambda: sign_in(client, "alice@example.org")
    )

    assert response.status_code == 302
    assert _status(running) == Status.STOPPING
    assert "no longer in the team's Entra ID group" in (
        running.events.get(to_status=Status.STOPPING).reason
    )


@pytest.mark.django_db
def test_a_failing_member_left_callback_is_logged_and_the_policy_still_applies(
    client, cast, django_capture_on_commit_callbacks, monkeypatch, caplog
):
    def broken(*, team, user, reason, now):
        raise RuntimeError("a broken app")

    # Registered first, so the leaver policy's callback runs after it fails.
    first = Callbacks()
    for callback in (broken, *hooks._member_left_callbacks.callbacks):
        first.register(callback)
    monkeypatch.setattr(hooks, "_member_left_callbacks", first)
    ws = _workspace(cast.team, cast.researcher)

    response = _after_commit(
        django_capture_on_commit_callbacks, lambda: _remove(client, cast, cast.researcher)
    )

    assert response.status_code == 302
    assert _status(ws) == Status.STOPPING
    assert "member_left callback" in caplog.text and "a broken app" in caplog.text
