"""One permission path (common/permissions.py and each app's rules.py): one definition of a
platform admin everywhere, services refusing whoever the rule refuses, and a navigation that
offers exactly the pages the user may open."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from clusters import services as cluster_services
from clusters.models import AksCluster, ClusterTeam, NodePool, PoolStatus
from common.permissions import ActionNotAllowed
from teams import selectors as team_selectors
from teams.models import AuditEntry, Decision, QuotaRequest
from teams.quota_requests import quota_request_approve
from tests.factories import OfferingFactory, UserFactory, WorkspaceFactory
from workspaces.actions import workspace_stop
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db

NAV_PAGES = {
    "Approvals": "approvals",
    "Spend": "platform-spend",
    "Clusters": "clusters:list",
    "Platform admin": "admin:index",
}


def test_a_deactivated_staff_account_is_no_platform_admin_anywhere(cast):
    gone = UserFactory(username="ex-admin", is_staff=True, is_active=False)
    AuditEntry.objects.create(at=timezone.now(), actor=cast.team_admin, action="x", team=cast.team)
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)

    assert list(team_selectors.team_visible_to(user=gone)) == []
    assert list(team_selectors.audit_visible_to(user=gone)) == []
    assert gone not in team_selectors.platform_admins()
    with pytest.raises(ActionNotAllowed):
        workspace_stop(user=gone, workspace=ws, now=timezone.now())
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING


def test_the_owner_a_team_admin_and_a_platform_admin_act_on_a_workspace_others_not(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    may = {
        role: getattr(cast, role).has_perm("workspaces.act_on_workspace", ws)
        for role in ("researcher", "teammate", "team_admin", "other_team_admin", "platform_admin")
    }
    assert may == {
        "researcher": True,
        "teammate": False,
        "team_admin": True,
        "other_team_admin": False,
        "platform_admin": True,
    }


def test_a_teammate_acting_on_a_workspace_gets_403_with_the_reason(client, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    client.force_login(cast.teammate)
    response = client.post(reverse("workspaces:action", args=[ws.pk, "stop"]))
    assert response.status_code == 403
    assert "Only the owner or a team admin can change this workspace." in response.content.decode()
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING


def test_a_team_admin_cannot_decide_a_workspace_request_through_the_service(cast):
    waiting = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.PENDING_APPROVAL, gpu_model="A100"
    )
    now = timezone.now()
    request = QuotaRequest.objects.create(
        team=cast.team,
        requester=cast.researcher,
        workspace=waiting,
        summary="big",
        over_quota=["over"],
        justification="why",
        price_per_hour=waiting.price_per_hour,
        created_at=now,
        expires_at=now + timedelta(days=7),
    )
    with pytest.raises(ActionNotAllowed):
        quota_request_approve(
            quota_request_id=request.pk, actor=cast.team_admin, comment="", now=now
        )
    assert QuotaRequest.objects.get(pk=request.pk).decision == Decision.PENDING
    assert Workspace.objects.get(pk=waiting.pk).status == Status.PENDING_APPROVAL


def test_cluster_services_refuse_anyone_but_a_platform_admin(cast):
    now = timezone.now()
    cluster = AksCluster.objects.create(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="rg",
        name="aks",
        location="eastus",
        registered_at=now,
    )
    offering = OfferingFactory()
    pool = NodePool.objects.create(
        cluster=cluster,
        name="mig1g",
        vm_size=offering.vm_size,
        gpu_model="A100",
        gpus_per_node=1,
        gpu_memory_gib=80,
        gpu_instance_profile="MIG1g",
        node_count=1,
        price_per_hour=offering.price_per_hour,
        status=PoolStatus.READY,
        created_at=now,
        updated_at=now,
    )
    with pytest.raises(ActionNotAllowed):
        cluster_services.cluster_team_set(
            actor=cast.team_admin, cluster=cluster, team=cast.team, now=now
        )
    with pytest.raises(ActionNotAllowed):
        cluster_services.pool_delete(actor=cast.team_admin, pool=pool, now=now)
    assert not ClusterTeam.objects.exists()
    assert NodePool.objects.get(pk=pool.pk).status == PoolStatus.READY


@pytest.mark.parametrize("who", ["researcher", "team_admin", "platform_admin"])
def test_the_navbar_offers_exactly_the_pages_the_user_may_open(client, cast, who):
    client.force_login(getattr(cast, who))
    navbar = client.get(reverse("workspaces:list")).content.decode().split("</nav>")[0]
    offered = {label for label in NAV_PAGES if f">{label}</a>" in navbar}
    opens = {
        label for label, name in NAV_PAGES.items() if client.get(reverse(name)).status_code == 200
    }
    assert offered == opens
    assert (offered == set(NAV_PAGES)) == (who == "platform_admin")
