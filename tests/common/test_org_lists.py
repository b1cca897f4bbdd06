"""The platform admin's other lists at organisation scale: teams, approvals, clusters, the
all-teams spend table and the audit log are paged, searchable, filterable and sortable as a
user sees them, and each runs as many queries for many rows as for few."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from clusters.models import AksCluster, NodePool, PoolStatus
from teams.models import AuditEntry, QuotaRequest
from tests.factories import OfferingFactory, TeamFactory, UserFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db


def _html(client, user, name, **params) -> str:
    client.force_login(user)
    response = client.get(reverse(name), params)
    assert response.status_code == 200
    return response.content.decode()


def _teams(count: int, prefix: str = "org") -> list:
    return [
        TeamFactory(name=f"{prefix.title()} team {n:03d}", slug=f"{prefix}-{n:03d}")
        for n in range(count)
    ]


def _pending(cast, count: int, team=None, **workspace):
    now = timezone.now()
    for n in range(count):
        ws = WorkspaceFactory(
            team=team or cast.team, owner=cast.researcher, status=Status.PENDING_APPROVAL,
            gpu_model="A100", **workspace,
        )  # fmt: skip
        QuotaRequest.objects.create(
            team=ws.team, requester=cast.researcher, workspace=ws, summary=f"ask {ws.name}",
            over_quota=["above quota"], justification="grant", price_per_hour="3.67",
            created_at=now - timedelta(minutes=count - n), expires_at=now + timedelta(days=7),
        )  # fmt: skip


def _pools(count: int, now=None):
    now = now or timezone.now()
    cluster = AksCluster.objects.create(
        subscription_id="sub", resource_group="rg", name="aks", location="eastus",
        registered_at=now,
    )  # fmt: skip
    for n in range(count):
        NodePool.objects.create(
            cluster=cluster, name=f"pool{n:03d}", vm_size="Standard_NC24ads_A100_v4",
            gpu_model="A100" if n % 2 else "T4", gpus_per_node=1, gpu_memory_gib=80,
            node_count=1, price_per_hour="3.67", status=PoolStatus.READY,
            created_at=now, updated_at=now,
        )  # fmt: skip


def _queries(client, user, name, **params) -> int:
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse(name), params).status_code == 200
    return len(ctx.captured_queries)


# --- Teams ----------------------------------------------------------------------------------


def test_the_teams_list_shows_50_teams_and_a_next_page(client, cast):
    _teams(60)
    html = _html(client, cast.platform_admin, "team-list")
    assert html.count('<tr id="team-') == 50
    assert "Page 1 of 2" in html and 'rel="next" href="?page=2"' in html
    second = _html(client, cast.platform_admin, "team-list", page="2")
    assert second.count('<tr id="team-') == 12  # 60 + the cast's two


def test_the_teams_list_searches_and_sorts(client, cast):
    _teams(3)
    html = _html(client, cast.platform_admin, "team-list", q="org team 00")
    assert re.findall(r'<tr id="team-([^"]+)"', html) == ["org-000", "org-001", "org-002"]
    html = _html(client, cast.platform_admin, "team-list", q="org", sort="-name")
    assert re.findall(r'<tr id="team-([^"]+)"', html) == ["org-002", "org-001", "org-000"]


def test_a_researcher_still_sees_only_their_teams(client, cast):
    _teams(3)
    html = _html(client, cast.researcher, "team-list", q="team")
    assert "org-000" not in html


# --- Approvals ------------------------------------------------------------------------------


def test_the_approval_queue_pages_by_20_oldest_first(client, cast):
    _pending(cast, 25)
    html = _html(client, cast.platform_admin, "approvals")
    rows = re.findall(r'<tr id="qr-(\d+)">', html)
    assert len(rows) == 20 and "Page 1 of 2" in html
    second = _html(client, cast.platform_admin, "approvals", page="2")
    assert len(re.findall(r'<tr id="qr-(\d+)">', second)) == 5
    oldest = QuotaRequest.objects.order_by("created_at").first()
    assert rows[0] == str(oldest.pk)


def test_the_approval_queue_filters_by_team_region_and_search(client, cast):
    OfferingFactory(region="westeurope")
    _pending(cast, 2)
    _pending(cast, 1, team=cast.other_team, region="westeurope", name="nlp-big")

    def rows(**params):
        html = _html(client, cast.platform_admin, "approvals", **params)
        return len(re.findall(r'<tr id="qr-', html))

    assert (rows(), rows(team="nlp"), rows(region="westeurope"), rows(q="nlp-big")) == (3, 1, 1, 1)
    assert rows(team="no-such-team") == 3  # refused: a form error, the filter left out


# --- Clusters -------------------------------------------------------------------------------


def test_the_clusters_page_pages_and_filters_node_pools(client, cast):
    _pools(55)
    html = _html(client, cast.platform_admin, "clusters:list")
    assert html.count("<code>Standard_NC24ads_A100_v4</code>") == 50 and "Page 1 of 2" in html
    t4 = _html(client, cast.platform_admin, "clusters:list", gpu_model="T4")
    assert t4.count("<code>Standard_NC24ads_A100_v4</code>") == 28
    found = _html(client, cast.platform_admin, "clusters:list", q="pool007")
    assert found.count("<code>Standard_NC24ads_A100_v4</code>") == 1


# --- All teams' spend -----------------------------------------------------------------------


def test_the_all_teams_spend_table_pages_searches_and_sorts(client, cast):
    _teams(55)
    html = _html(client, cast.platform_admin, "platform-spend", sort="team")
    names = re.findall(r'<th scope="row"><a href="/teams/([^/]+)/spend/">', html)
    assert len(names) == 50 and names[:2] == ["nlp", "org-000"] and "Page 1 of 2" in html
    found = _html(client, cast.platform_admin, "platform-spend", q="org team 054")
    assert re.findall(r'<th scope="row"><a href="/teams/([^/]+)/spend/">', found) == ["org-054"]


# --- Audit log ------------------------------------------------------------------------------


def test_a_tampered_audit_cursor_shows_the_newest_entries(client, cast):
    now = timezone.now()
    AuditEntry.objects.bulk_create(
        AuditEntry(
            at=now - timedelta(minutes=n),
            team=cast.team,
            action="team.limits",
            object_type="teams.Team",
            object_id=str(n),
        )  # fmt: skip
        for n in range(60)
    )
    html = _html(client, cast.platform_admin, "audit", cursor="eyJzIjoiLWF0In0:forged:sig")
    assert "team #0 (since deleted)<" in html and 'rel="next"' in html


# --- Constant queries -----------------------------------------------------------------------


def _grow(cast, scale: int) -> None:
    teams = _teams(scale, prefix=f"grow{scale}")
    _pending(cast, scale)
    for n, team in enumerate(teams):
        owner = UserFactory(username=f"org-user-{scale}-{n}")
        WorkspaceFactory(team=team, owner=owner, status=Status.RUNNING)
    AuditEntry.objects.bulk_create(
        AuditEntry(
            at=timezone.now(),
            team=cast.team,
            action="team.limits",
            object_type="teams.Team",
            object_id=str(n),
        )  # fmt: skip
        for n in range(scale)
    )


@pytest.mark.parametrize(
    "name", ["team-list", "approvals", "platform-spend", "audit", "clusters:list"]
)
def test_each_page_runs_as_many_queries_for_many_rows_as_for_few(client, cast, name):
    _pools(2)
    _grow(cast, 3)
    few = _queries(client, cast.platform_admin, name)
    _grow(cast, 60)
    assert _queries(client, cast.platform_admin, name) == few


def test_the_audit_log_sorts_oldest_first_and_pages_on(client, cast):
    now = timezone.now()
    AuditEntry.objects.bulk_create(
        AuditEntry(
            at=now - timedelta(minutes=n),
            team=cast.team,
            action="team.limits",
            object_type="teams.Team",
            object_id=f"x{n}",  # no such team: shown by its id
        )  # fmt: skip
        for n in range(60)
    )
    html = _html(client, cast.platform_admin, "audit", sort="at")
    objects = re.findall(r"team #x(\d+) \(since deleted\)<", html)
    assert objects[:2] == ["59", "58"] and len(objects) == 50
    cursor = re.search(r'rel="next" href="\?([^"]+)"', html).group(1).replace("&amp;", "&")
    client.force_login(cast.platform_admin)
    rest = client.get(reverse("audit") + "?" + cursor).content.decode()
    assert re.findall(r"team #x(\d+) \(since deleted\)<", rest) == [
        str(n) for n in range(9, -1, -1)
    ]
