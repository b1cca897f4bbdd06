"""/api/v1/teams/{slug}/storage and /workspaces/{id}/mounts: the storage page's figures and
rules, for scripts and the CLI."""

import json

import pytest
from django.utils import timezone

from storage import services
from storage.models import TeamShare, VolumeState
from tests.storage.test_mounts import _workspace

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quota(cast):
    services.storage_quota_set(
        user=cast.platform_admin, team=cast.team, quota_gib=4096, now=timezone.now()
    )


def _post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_a_team_admin_creates_a_share_and_a_researcher_sees_how_they_mount_it(
    client, cast, sim, quota
):
    client.force_login(cast.team_admin)
    made = _post(
        client,
        "/api/v1/teams/vision/storage/shares",
        {"name": "datasets", "size_gib": 1024, "researcher_access": "ro"},
    )
    assert made.status_code == 201 and made.json()["mount_path"] == "/data/datasets"

    client.force_login(cast.researcher)
    body = client.get("/api/v1/teams/vision/storage").json()

    assert body["quota_gib"] == 4096 and body["used_gib"] == 1024
    (share,) = body["shares"]
    assert (share["name"], share["state"], share["your_access"]) == ("datasets", "ready", "ro")
    assert body["home"] is None


def test_a_researcher_may_not_create_and_an_outsider_gets_404(client, cast, quota):
    body = {"name": "datasets", "size_gib": 1024}
    client.force_login(cast.researcher)
    assert _post(client, "/api/v1/teams/vision/storage/shares", body).status_code == 403
    client.force_login(cast.outsider)
    assert client.get("/api/v1/teams/vision/storage").status_code == 404


def test_bad_input_and_an_unconfirmed_delete_are_400(client, cast, sim, quota):
    client.force_login(cast.team_admin)
    bad = _post(client, "/api/v1/teams/vision/storage/shares", {"name": "../x", "size_gib": 5})
    assert bad.status_code == 400
    assert bad["Content-Type"].startswith("application/problem+json")
    made = _post(client, "/api/v1/teams/vision/storage/shares", {"name": "data", "size_gib": 100})
    url = f"/api/v1/teams/vision/storage/shares/{made.json()['id']}"
    assert client.delete(url).status_code == 400
    assert client.delete(f"{url}?confirm=data").status_code == 202
    assert TeamShare.objects.get(name="data").state == VolumeState.DELETED


def test_a_workspace_lists_what_it_mounts_where(client, cast, sim, quota):
    services.share_create(
        user=cast.team_admin,
        team=cast.team,
        name="datasets",
        size_gib=1024,
        researcher_access="ro",
        now=timezone.now(),
    )
    _, ws = _workspace(cast.researcher, cast.team)
    client.force_login(cast.researcher)

    mounts = client.get(f"/api/v1/workspaces/{ws.pk}/mounts").json()

    assert [(m["path"], m["label"], m["read_only"]) for m in mounts] == [
        ("/data/datasets", "datasets", True),
        ("/data/home", "home", False),
    ]
    client.force_login(cast.outsider)
    assert client.get(f"/api/v1/workspaces/{ws.pk}/mounts").status_code == 404
