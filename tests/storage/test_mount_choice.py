"""Choosing mounts at the request (docs/storage.md): the page's tick boxes and the API's
``mounts``/``home`` decide which team shares and whether the home a workspace mounts; the
choice is recorded on the workspace and is what its VM's cloud-init mounts; a share the user
may not mount, or that the team does not have, is refused before anything is made."""

import json
import uuid

import pytest
from django.utils import timezone

from storage import services
from storage.models import Access, PersonalHome, TeamShare, VolumeState
from tests.factories import SSH_KEY, OfferingFactory
from tests.storage.test_mounts import _storage
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)


def _api_request(client, **extra):
    body = {
        "kind": "vm",  # kind-ok: the API's body names the kind
        "team": "vision",
        "name": f"ws-{uuid.uuid4().hex[:6]}",
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
        **extra,
    }
    return client.post(
        "/api/v1/workspaces",
        json.dumps(body),
        content_type="application/json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )


@pytest.fixture
def shares(cast, sim):
    OfferingFactory()
    _storage(cast)
    services.share_create(
        user=cast.team_admin,
        team=cast.team,
        name="admins-only",
        size_gib=100,
        researcher_access=Access.NONE,
        now=timezone.now(),
    )
    return sim


def _vm(ws):
    return f"ws-{ws.id.hex[:12]}"


def test_the_api_mounts_only_the_shares_chosen_and_no_home(client, cast, shares):
    client.force_login(cast.researcher)

    made = _api_request(client, mounts=["scratch"], home=False)

    assert made.status_code == 201, made.content
    ws = Workspace.objects.get(pk=made.json()["id"])
    assert (ws.mount_shares, ws.mount_home) == (["scratch"], False)
    assert [m["path"] for m in shares.storage_mounts(_vm(ws))] == ["/data/scratch"]
    listed = client.get(f"/api/v1/workspaces/{ws.pk}/mounts").json()
    assert [m["path"] for m in listed] == ["/data/scratch"]
    # Not asked for, so not made: the home waits for a workspace that mounts it.
    assert not PersonalHome.objects.filter(owner=cast.researcher).exists()


def test_the_api_mounts_every_share_the_role_allows_by_default(client, cast, shares):
    client.force_login(cast.researcher)

    made = _api_request(client)

    ws = Workspace.objects.get(pk=made.json()["id"])
    assert (ws.mount_shares, ws.mount_home) == (None, True)
    paths = sorted(m["path"] for m in shares.storage_mounts(_vm(ws)))
    assert paths == ["/data/datasets", "/data/home", "/data/scratch"]


@pytest.mark.parametrize("name", ["admins-only", "nope"])
def test_a_share_the_user_may_not_mount_is_a_400_and_nothing_is_made(client, cast, shares, name):
    client.force_login(cast.researcher)

    refused = _api_request(client, mounts=["scratch", name])

    assert refused.status_code == 400
    assert refused["Content-Type"].startswith("application/problem+json")
    (error,) = refused.json()["errors"]
    assert error["loc"] == ["body", "mounts"] and name in error["msg"]
    assert not Workspace.objects.exists()
    assert shares.state()["virtualMachines"] == []


def test_the_page_mounts_what_is_ticked(client, cast, shares):
    client.force_login(cast.researcher)
    page = client.get("/workspaces/new/").content.decode()
    assert 'value="scratch"' in page and 'value="datasets"' in page
    assert 'value="admins-only"' not in page  # researchers may not mount it
    offering = OfferingFactory._meta.model.objects.get(vm_size="Standard_NC24ads_A100_v4")

    posted = client.post(
        "/workspaces/new/",
        {
            "team": cast.team.pk,
            "name": "ticked",
            "region": "eastus",
            "offering": offering.pk,
            "ssh_public_key": SSH_KEY,
            "request_key": str(uuid.uuid4()),
            "mounts_shown": "1",
            "mounts": ["datasets"],
            # The home's box left unticked: the page's form sends nothing for it.
        },
    )

    assert posted.status_code == 302, posted.content.decode()[:3000]
    ws = Workspace.objects.get(name="ticked")
    assert (ws.mount_shares, ws.mount_home) == (["datasets"], False)
    assert [m["path"] for m in shares.storage_mounts(_vm(ws))] == ["/data/datasets"]
    detail = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert "<code>/data/datasets</code>: datasets, read-only" in detail
    assert "/data/scratch" not in detail


def test_the_page_refuses_a_share_on_the_form(client, cast, shares):
    client.force_login(cast.researcher)
    offering = OfferingFactory._meta.model.objects.get(vm_size="Standard_NC24ads_A100_v4")

    page = client.post(
        "/workspaces/new/",
        {
            "team": cast.team.pk,
            "name": "refused",
            "region": "eastus",
            "offering": offering.pk,
            "ssh_public_key": SSH_KEY,
            "request_key": str(uuid.uuid4()),
            "mounts_shown": "1",
            "mounts": ["admins-only"],
            "home": "on",
        },
    )

    assert page.status_code == 200
    assert "admins-only is not a share of the team you may mount." in page.content.decode()
    assert not Workspace.objects.exists()


def test_choosing_another_team_lists_that_teams_shares(client, cast):
    from tests.factories import MembershipFactory

    OfferingFactory()
    MembershipFactory(team=cast.other_team, user=cast.researcher)
    TeamShare.objects.create(
        team=cast.other_team,
        name="corpus",
        size_gib=100,
        azure_name="corpus-1a2b3c",
        state=VolumeState.READY,
        created_at=timezone.now(),
    )
    client.force_login(cast.researcher)

    # The VM page's team select asks for the size table, and gets the tick boxes with it.
    part = client.get(
        f"/workspaces/new/?team={cast.other_team.pk}&region=eastus", headers={"HX-Request": "true"}
    ).content.decode()
    # The MIG page is rendered again for the team; its select takes the tick boxes from it.
    mig = client.get(f"/workspaces/new/mig/?team={cast.other_team.pk}").content.decode()

    assert 'hx-swap-oob="true"' in part and 'value="corpus"' in part
    assert 'value="corpus"' in mig and 'hx-select-oob="#mounts-choice"' in mig
    vision = client.get(f"/workspaces/new/mig/?team={cast.team.pk}").content.decode()
    assert 'value="corpus"' not in vision  # another team's share
