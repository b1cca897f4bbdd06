"""The team storage page: members see it, outsiders get 404, team admins create and delete
(confirmed) shares, platform admins set the quota; htmx gets the section back."""

import pytest
from django.urls import reverse

from storage.models import TeamShare, VolumeState
from storage.selectors import team_storage_get
from teams.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


def _url(name, cast, **kw):
    return reverse(name, kwargs={"slug": cast.team.slug, **kw})


def test_members_see_the_page_and_outsiders_get_404(client, cast):
    client.force_login(cast.researcher)
    page = client.get(_url("team-storage", cast))
    assert page.status_code == 200
    assert "Create share" not in page.content.decode()
    client.force_login(cast.outsider)
    assert client.get(_url("team-storage", cast)).status_code == 404


def test_a_team_admin_sees_the_forms_to_create_a_share_but_not_the_quota(client, cast):
    client.force_login(cast.team_admin)
    page = client.get(_url("team-storage", cast)).content.decode()
    assert "Create share" in page and "Save quota" not in page
    client.force_login(cast.platform_admin)
    assert "Save quota" in client.get(_url("team-storage", cast)).content.decode()


def test_a_team_admin_creates_and_deletes_a_share_with_its_name_typed(client, cast, sim):
    team_storage = team_storage_get(team=cast.team)
    team_storage.quota_gib = 2048
    team_storage.save()
    client.force_login(cast.team_admin)

    made = client.post(
        _url("storage-share-create", cast),
        {"name": "datasets", "size_gib": 1024, "researcher_access": "ro"},
        headers={"HX-Request": "true"},
    )

    assert made.status_code == 200 and "datasets" in made.content.decode()
    share = TeamShare.objects.get(team=cast.team, name="datasets")
    assert share.state == VolumeState.READY
    wrong = client.post(_url("storage-share-delete", cast, pk=share.pk), {"confirm": "no"})
    assert wrong.status_code == 400
    assert TeamShare.objects.get(pk=share.pk).deleted_at is None
    done = client.post(_url("storage-share-delete", cast, pk=share.pk), {"confirm": "datasets"})
    assert done.status_code == 302
    assert TeamShare.objects.get(pk=share.pk).state == VolumeState.DELETED
    assert AuditEntry.objects.filter(action="storage.share.delete", actor=cast.team_admin).exists()


def test_a_share_over_quota_is_a_form_error(client, cast):
    client.force_login(cast.team_admin)

    reply = client.post(
        _url("storage-share-create", cast),
        {"name": "datasets", "size_gib": 1024, "researcher_access": "rw"},
    )

    assert reply.status_code == 400 and "quota" in reply.content.decode()


def test_a_researcher_may_not_create_and_only_a_platform_admin_sets_the_quota(client, cast):
    client.force_login(cast.researcher)
    body = {"name": "datasets", "size_gib": 1024, "researcher_access": "rw"}
    assert client.post(_url("storage-share-create", cast), body).status_code == 403
    client.force_login(cast.team_admin)
    assert client.post(_url("storage-quota", cast), {"quota_gib": 99999}).status_code == 403
    client.force_login(cast.platform_admin)
    assert client.post(_url("storage-quota", cast), {"quota_gib": 4096}).status_code == 302
    assert team_storage_get(team=cast.team).quota_gib == 4096


def test_hostile_input_is_a_400_not_a_500(client, cast):
    client.force_login(cast.platform_admin)
    assert client.post(_url("storage-quota", cast), {"quota_gib": "1e9999"}).status_code == 400
    body = {"name": "../../x", "size_gib": "-1", "researcher_access": "everything"}
    assert client.post(_url("storage-share-create", cast), body).status_code == 400
    assert client.post(_url("storage-share-delete", cast, pk=999999), {}).status_code == 404
