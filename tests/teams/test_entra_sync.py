"""The periodic Graph sync against the emulated tenant: leavers of a linked group lose the team
and users disabled (or deleted) in Entra ID are deactivated between sign-ins, their sessions
ended; Graph's paging, throttling and failures; re-enabled users sign in again."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from cloudsim.entra.directory import NLP_GROUP, VISION_LAB, demo_oid
from live import stamps, streams, tokens
from portal.celery import app as celery_app
from teams import entra_oidc
from teams.entra_sync import entra_sync
from teams.graph import RETRY_AFTER_CAP, GraphClient
from teams.models import AuditEntry, Membership, Profile, Team
from tests.entra_portal import entra_on_fixture, sign_in  # noqa: F401
from tests.factories import MembershipFactory, UserFactory

User = get_user_model()


def _user(name: str):
    return User.objects.get(profile__signin_object_id=demo_oid(name))


def _signed_in(client, who: str):
    assert sign_in(client, f"{who}@example.org").status_code == 302
    return _user(who)


def _entra_account(oid: str, team, username: str):
    """A portal account made by an earlier Entra ID sign-in, member of ``team``."""
    user = UserFactory(username=username)
    Profile.objects.update_or_create(user=user, defaults={"signin_object_id": oid})
    MembershipFactory(user=user, team=team)
    return user


def _graph(waits: list) -> GraphClient:
    return GraphClient(token=entra_oidc.graph_token(), sleep=waits.append)


def test_a_member_removed_from_the_group_loses_the_team_within_a_sync(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 200
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 200  # not yet

    result = entra_sync(now=timezone.now())

    assert result.members_removed == 1 and result.failures == 0 and not result.aborted
    assert result.groups_read == 2
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 404
    assert not Membership.objects.filter(user=alice).exists()
    removed = AuditEntry.objects.get(action="entra.membership.remove")
    assert removed.actor is None and removed.after == {"by": "Entra ID"}
    assert alice.refresh_from_db() is None and alice.is_active  # still may sign in


def test_a_user_disabled_in_entra_is_logged_out_and_can_sign_in_once_enabled(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    sim.entra_disable_user("alice@example.org")

    result = entra_sync(now=timezone.now())

    assert result.users_deactivated == 1
    response = client.get(reverse("team-detail", args=["vision"]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    alice.refresh_from_db()
    assert not alice.is_active and alice.profile.entra_disabled_at is not None
    refused = sign_in(client, "alice@example.org")  # Entra ID itself refuses her now
    assert refused.status_code == 400 and "AADSTS50057" in refused.content.decode()

    sim.entra_disable_user("alice@example.org", enabled=True)
    assert sign_in(client, "alice@example.org").status_code == 302
    assert client.get(reverse("team-detail", args=["vision"])).status_code == 200
    alice.refresh_from_db()
    assert alice.is_active and alice.profile.entra_disabled_at is None
    actions = list(AuditEntry.objects.order_by("pk").values_list("action", flat=True))
    assert actions[-2:] == ["entra.user.deactivate", "entra.user.reactivate"]
    audit = AuditEntry.objects.get(action="entra.user.deactivate")
    assert audit.actor is None and audit.after["by"] == "Entra ID"


def test_an_old_session_stays_dead_after_reactivation(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    sim.entra_disable_user("alice@example.org")
    entra_sync(now=timezone.now())
    User.objects.filter(pk=alice.pk).update(is_active=True)  # e.g. reactivated elsewhere

    response = client.get(reverse("team-detail", args=["vision"]))

    assert response.status_code == 302  # the session auth hash changed with the password


def test_a_user_deleted_from_the_tenant_is_deactivated(client, entra_on, sim):
    ghost = _entra_account(str(uuid.uuid4()), entra_on["vision"], "ghost@example.org")
    bob = _signed_in(client, "bob")

    result = entra_sync(now=timezone.now())

    ghost.refresh_from_db(), bob.refresh_from_db()
    assert not ghost.is_active and bob.is_active
    assert result.users_deactivated == 1 and result.members_removed == 1  # ghost left vision
    assert result.users_checked == 2
    # Bob was seen in NLP Group's member list: only the ghost was looked up by id.
    assert result.graph_calls == 2 + 1


def test_a_portal_deactivated_account_stays_out(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    User.objects.filter(pk=alice.pk).update(is_active=False)  # a portal admin did it

    entra_sync(now=timezone.now())
    client.logout()
    response = sign_in(client, "alice@example.org")

    assert response.status_code == 400
    assert "deactivated in the portal" in response.content.decode()


def test_members_on_a_later_page_are_kept(client, entra_on, sim):
    names = [f"r{i:04d}" for i in range(1000)]
    added = sim.entra_add(
        users=[{"name": n} for n in names],
        groups=[{"display_name": "Big", "id": NLP_GROUP, "members": names}],
    )
    last = added["users"][-1]["id"]  # the 1,000th member: on Graph's second page of 999
    kept = _entra_account(last, entra_on["nlp"], "r0999@example.org")

    result = entra_sync(now=timezone.now())

    assert Membership.objects.filter(user=kept, team=entra_on["nlp"]).exists()
    assert result.members_removed == 0 and result.failures == 0
    assert result.graph_calls == 3  # Vision Lab, NLP Group's two pages


def test_a_throttled_page_is_retried_after_retry_after(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    sim.inject("graph.groups.members", "throttle", count=2, retry_after=120)
    waits = []

    result = entra_sync(now=timezone.now(), graph=_graph(waits))

    assert waits == [RETRY_AFTER_CAP, RETRY_AFTER_CAP]  # 120 s asked, capped
    assert result.failures == 0 and result.members_removed == 1
    assert result.graph_calls == 2 + 2 + 1  # and alice, in no group now, looked up
    assert not Membership.objects.filter(user=alice).exists()


def test_throttled_past_three_tries_skips_the_group_only(client, entra_on, sim):
    alice, bob = _signed_in(client, "alice"), _signed_in(client, "bob")
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    sim.entra_remove_member(NLP_GROUP, "bob@example.org")
    sim.inject("graph.groups.members", "throttle", count=3, retry_after=1)  # the first group
    waits = []

    result = entra_sync(now=timezone.now(), graph=_graph(waits))

    assert waits == [1.0, 1.0] and result.failures == 1 and result.groups_read == 1
    # Groups are read in order of id: Vision Lab (0f6d…) took the three throttles.
    assert Membership.objects.filter(user=alice, team=entra_on["vision"]).exists()
    assert not Membership.objects.filter(user=bob).exists()


def test_a_group_gone_is_skipped_while_the_others_sync(client, entra_on, sim, settings):
    alice, bob = _signed_in(client, "alice"), _signed_in(client, "bob")
    gone = str(uuid.uuid4())
    Team.objects.filter(pk=entra_on["vision"].pk).update(entra_group_id=gone)
    sim.entra_remove_member(NLP_GROUP, "bob@example.org")

    result = entra_sync(now=timezone.now())

    assert result.failures == 1 and result.groups_read == 1 and result.members_removed == 1
    assert Membership.objects.filter(user=alice, team=entra_on["vision"]).exists()
    assert not Membership.objects.filter(user=bob).exists()


def test_no_token_changes_nothing(client, entra_on, sim):
    alice = _signed_in(client, "alice")
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    sim.entra_disable_user("alice@example.org")
    sim.inject("entra.token", "unavailable")
    audited = AuditEntry.objects.count()

    result = entra_sync(now=timezone.now())

    assert result.aborted and result.failures == 1 and result.graph_calls == 0
    alice.refresh_from_db()
    assert alice.is_active and Membership.objects.filter(user=alice).exists()
    assert AuditEntry.objects.count() == audited


def test_off_without_entra_sign_in(db, settings):
    settings.ENTRA_TENANT_ID = settings.ENTRA_CLIENT_ID = ""
    assert entra_sync(now=timezone.now()).aborted


def test_the_audit_page_shows_entra_id_as_who_removed(client, entra_on, sim):
    _signed_in(client, "alice")
    sim.entra_remove_member(VISION_LAB, "alice@example.org")
    entra_sync(now=timezone.now())
    client.force_login(UserFactory(username="pat", is_staff=True))

    page = client.get(reverse("audit"), {"action": "entra.membership.remove"}).content.decode()

    assert "<td>Entra ID</td>" in page and "alice@example.org" in page


def test_the_command_prints_the_counts(entra_on, sim, capsys):
    call_command("entra_sync")
    out = capsys.readouterr().out
    assert "groups_read: 2" in out and "aborted: False" in out


def test_beat_runs_the_sync_every_entra_sync_seconds(settings):
    from portal.celery import _beat_schedule

    assert settings.ENTRA_SYNC_SECONDS == 300.0  # the documented default
    kept = celery_app.conf.beat_schedule
    settings.ENTRA_SYNC_SECONDS = 120.0
    try:
        _beat_schedule(celery_app)
        schedule = celery_app.conf.beat_schedule["entra-sync"]
    finally:
        celery_app.conf.beat_schedule = kept
    assert schedule == {"task": "teams.tasks.entra_sync", "schedule": 120.0}


def test_the_task_returns_the_counts(entra_on, sim):
    from teams.tasks import entra_sync as task

    counts = task.delay().get()
    assert counts["groups_read"] == 2 and counts["aborted"] is False


@pytest.mark.django_db(transaction=True)  # the stream closes its database connection
def test_an_open_live_stream_ends_when_the_sync_deactivates_its_user(
    client, entra_on, sim, monkeypatch
):
    monkeypatch.setattr(streams, "WSGI_LIFETIME", 3.0)  # a stream that never ends fails fast
    alice = _signed_in(client, "alice")
    topics = [f"team:{entra_on['vision'].pk}"]
    token = tokens.sign(user_id=alice.pk, topics=topics)
    response = client.get(reverse("live-stream"), {"t": token, "v": stamps.current_version(topics)})
    chunks = iter(response.streaming_content)
    assert b"retry:" in next(chunks)
    sim.entra_disable_user("alice@example.org")

    entra_sync(now=timezone.now())

    assert next(chunks, b"") == streams.END
    response.close()
    again = client.get(reverse("live-stream"), {"t": token})
    assert again.status_code == 403  # the session is gone: EventSource gives up
