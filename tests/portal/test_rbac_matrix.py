"""The RBAC matrix: every URL of the URL conf, requested as each member of the cast, answers
as the EXPECTED table says. A new URL without a row fails here, so no view ships without a
rule. Anonymous users are sent to log in ("login"); strangers to a team's objects get 404;
members without the right 403; permitted GETs 200 and permitted POSTs redirect (302).

One test per URL asks it as every role, each role's request in a savepoint rolled back after
it, so each role meets the objects as made (a researcher's delete does not hide the workspace
from the team admin after it) while the objects are made once per URL, not once per role.
"""

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from bookings.services import booking_create
from clusters.models import AksCluster, NodePool, PoolStatus
from environments.demo import seed_demo_environments
from notifications.models import Notice
from storage.models import TeamShare, TeamStorage, VolumeState
from teams.models import Membership, QuotaRequest, TeamQuotaIncrease
from teams.tokens import api_token_create
from teams.webhook_settings import webhook_create
from tests.factories import SSH_KEY, OfferingFactory, UserFactory, WorkspaceFactory
from workspaces.models import DiskSnapshot
from workspaces.states import Status

ROLES = ("anonymous", "outsider", "researcher", "other_team_admin", "team_admin", "platform_admin")
SKIPPED_PREFIXES = ("admin/", "static/", "media/")
LOGIN = "login"  # 302 to the login page
LINK_GROUP = "5e0c7d1a-2b3c-4d5e-8f90-a1b2c3d4e5f6"  # A security group "link a group" may take.


@dataclass(frozen=True)
class Row:
    method: str
    statuses: tuple  # one per ROLES entry: an HTTP status, or LOGIN
    pk: str = ""  # which object of the ``objects`` fixture fills a ``pk`` parameter
    data: dict = field(default_factory=dict)
    query: str = ""  # appended to the URL


# The API's request body (JSON) for a VM in the cast's team.
API_REQUEST = {
    "kind": "vm",
    "team": "vision",
    "name": "from-the-api",
    "vm_size": "Standard_NC24ads_A100_v4",
    "region": "eastus",
    "ssh_public_key": SSH_KEY,
    # The researcher holds the team's per-member cap of workspaces already: it waits.
    "justification": "a paper deadline",
}

# The API's body for an environment of the cast's team.
API_ENVIRONMENT = {
    "team": "vision",
    "name": "Team CUDA",
    "slug": "team-cuda",
    "kinds": ["vm"],
    "vm_image": "microsoft-dsvm:ubuntu-hpc:2204:22.04.2024102301",
    "driver_method": "preinstalled",
    "gpu_families": ["A100"],
}


# The API's body for a booking of one A100 VM for the cast's team, two days ahead.
_BOOKED_FROM = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
API_BOOKING = {
    "title": "Lab",
    "vm_size": "Standard_NC24ads_A100_v4",
    "region": "eastus",
    "instances": 1,
    "starts_at": _BOOKED_FROM.isoformat(),
    "ends_at": (_BOOKED_FROM + timedelta(hours=4)).isoformat(),
}


_ = LOGIN  # short alias, to keep the table readable
EXPECTED = {
    #                                anon outsider researcher other-admin team-admin platform
    "home": Row("GET", (302, 302, 302, 302, 302, 302)),
    "healthz": Row("GET", (200, 200, 200, 200, 200, 200)),
    "favicon": Row("GET", (301, 301, 301, 301, 301, 301)),  # to the static icon
    # Prometheus authenticates by bearer token, never by session; with no METRICS_TOKEN set the
    # endpoint does not exist (tests/portal/test_metrics.py covers it with a token).
    "metrics": Row("GET", (404, 404, 404, 404, 404, 404)),
    "login": Row("GET", (200, 200, 200, 200, 200, 200)),
    "logout": Row("POST", (302, 302, 302, 302, 302, 302)),
    # Entra ID sign-in is off unless ENTRA_TENANT_ID and ENTRA_CLIENT_ID are set: 404 here;
    # tests/teams/test_entra_signin.py and test_entra_tokens.py cover it switched on.
    "entra-login": Row("GET", (404, 404, 404, 404, 404, 404)),
    "entra-callback": Row("GET", (404, 404, 404, 404, 404, 404)),
    "workspaces:list": Row("GET", (_, 200, 200, 200, 200, 200)),
    "workspaces:request": Row("GET", (_, 200, 200, 200, 200, 200)),
    # The equivalent sizes panel of the request form: the catalog, the same for every member.
    "workspaces:request-equivalents": Row("GET", (_, 200, 200, 200, 200, 200)),
    "workspaces:detail": Row("GET", (_, 404, 200, 404, 200, 200), pk="workspace"),
    "workspaces:action": Row("POST", (_, 404, 302, 404, 302, 302), pk="workspace"),
    # Workspace apps (apps_proxy): the way in answers 404 for anything but a running
    # workspace's app its user may open (tests/apps_proxy/test_proxy.py opens one); the
    # controls are its owner's alone, and nobody else learns they exist.
    "apps_proxy:enter": Row("GET", (_, 404, 404, 404, 404, 404)),
    "apps_proxy:admin_access": Row(
        "POST", (_, 404, 302, 404, 404, 404), pk="workspace", data={"grant": "1"}
    ),
    "apps_proxy:port_share": Row(
        "POST", (_, 404, 302, 404, 404, 404), pk="workspace", data={"port": 6006, "level": "team"}
    ),
    "apps_proxy:port_stop": Row("POST", (_, 404, 302, 404, 404, 404), pk="workspace"),
    "workspaces:resize": Row("GET", (_, 404, 200, 404, 200, 200), pk="workspace"),
    "approvals": Row("GET", (_, 403, 403, 403, 403, 200)),
    # Agents authenticate by token, never by session: every browser user gets 401 JSON.
    "workspaces:telemetry": Row("GET", (_, 404, 200, 404, 200, 200), pk="workspace"),
    # The fair queue (scheduling/): the whole queue and its moves are platform admins'.
    "scheduling:queue": Row("GET", (_, 403, 403, 403, 403, 200)),
    "scheduling:panel": Row("GET", (_, 404, 200, 404, 200, 200), pk="workspace"),
    "scheduling:action": Row("POST", (_, 404, 302, 404, 302, 302), pk="workspace"),
    "scheduling:move": Row("POST", (_, 403, 403, 403, 403, 302), pk="workspace"),
    "scheduling:team": Row("GET", (_, 404, 200, 404, 200, 200)),
    "scheduling:autostart": Row(
        "POST",
        (_, 404, 302, 404, 302, 302),
        pk="workspace",
        data={"weekdays": ["0"], "at": "08:30", "timezone": "UTC"},
    ),
    # The board: the user's first team by default; another team's by ?team= is 404.
    "scheduling:free-now": Row("GET", (_, 200, 200, 200, 200, 200)),
    "agent-heartbeat": Row("POST", (401, 401, 401, 401, 401, 401), pk="workspace"),
    "approval-azure-quota": Row("GET", (_, 403, 403, 403, 403, 200), pk="quota_request"),
    "approval-decide": Row("POST", (_, 404, 403, 404, 403, 302), pk="quota_request"),
    "increase-decide": Row("POST", (_, 404, 403, 404, 403, 302), pk="increase"),
    "notice-list": Row("GET", (_, 200, 200, 200, 200, 200)),
    "notice-dismiss": Row("POST", (_, 302, 302, 302, 302, 302), pk="notice"),
    # Live pages: a subscription signed for the user (live/tokens.py) or 400; never a login
    # redirect, which an EventSource would follow to an HTML page.
    "live-stream": Row("GET", (403, 400, 400, 400, 400, 400)),
    "live-poll": Row("GET", (403, 400, 400, 400, 400, 400)),
    # Everyone's own Entra ID identity, nobody else's.
    "account": Row("GET", (_, 200, 200, 200, 200, 200)),
    # Each user's own tokens; the token revoked is the researcher's: anyone else's is a 404.
    "account-tokens": Row("GET", (_, 200, 200, 200, 200, 200)),
    "account-token-revoke": Row("POST", (_, 404, 302, 404, 404, 404), pk="api_token"),
    "team-list": Row("GET", (_, 200, 200, 200, 200, 200)),
    "team-detail": Row("GET", (_, 404, 200, 404, 200, 200)),
    "team-invite": Row(
        "POST", (_, 404, 403, 404, 302, 302), data={"identifier": "dave", "role": "researcher"}
    ),
    # "Link a group" needs Entra ID sign-in: 404 for those who may manage the team while it is
    # off (here); tests/teams/test_team_group_link.py covers it switched on.
    "team-group": Row("POST", (_, 404, 403, 404, 404, 404), data={"group_id": "{group}"}),
    "team-member-role": Row(
        "POST",
        (_, 404, 403, 404, 302, 302),
        pk="researcher_membership",
        data={"role": "team_admin"},
    ),
    "team-member-remove": Row("POST", (_, 404, 403, 404, 302, 302), pk="teammate_membership"),
    # Merging a local account into an Entra ID one: platform admins; without a name, the
    # section's error.
    "team-member-merge": Row("POST", (_, 404, 403, 404, 403, 200), pk="researcher_membership"),
    "team-increase": Row(
        "POST",
        (_, 404, 403, 404, 302, 403),
        data={"gpu_model": "A100", "gpus": "8", "justification": "grant"},
    ),
    "team-idle-policy": Row("GET", (_, 404, 403, 404, 200, 200)),
    "team-leaver-policy": Row("POST", (_, 404, 403, 404, 302, 302), data={"leaver_policy": "keep"}),
    "team-quota": Row("GET", (_, 404, 403, 404, 403, 200)),
    # The team's storage: members read it; its admins change shares, platform admins the quota.
    "team-storage": Row("GET", (_, 404, 200, 404, 200, 200)),
    "storage-share-create": Row(
        "POST",
        (_, 404, 403, 404, 302, 302),
        data={"name": "checkpoints", "size_gib": "100", "researcher_access": "rw"},
    ),
    "storage-share-delete": Row(
        "POST", (_, 404, 403, 404, 302, 302), pk="share", data={"confirm": "datasets"}
    ),
    # A share that is not deleted cannot be restored: a permitted caller gets the form's 400.
    "storage-share-restore": Row("POST", (_, 404, 403, 404, 400, 400), pk="share"),
    "storage-share-snapshot": Row("POST", (_, 404, 403, 404, 302, 302), pk="share"),
    "storage-quota": Row("POST", (_, 404, 403, 404, 403, 302), data={"quota_gib": "5000"}),
    # A kept disk snapshot: its owner (the researcher) or whoever manages the team's storage.
    "storage-disk-snapshot-delete": Row(
        "POST", (_, 404, 302, 404, 302, 302), pk="disk_snapshot", data={"confirm": "ws-kept"}
    ),
    # Not deleted, so not restorable: a permitted caller gets the 400.
    "storage-disk-snapshot-restore": Row("POST", (_, 404, 400, 404, 400, 400), pk="disk_snapshot"),
    # The team's chat and JSON webhooks: its admins and platform admins.
    "team-webhooks": Row("GET", (_, 404, 403, 404, 200, 200)),
    # Every member reads what the team is offered; its admins hide catalog entries.
    "team-environments": Row("GET", (_, 404, 200, 404, 200, 200)),
    "team-environment-visibility": Row(
        "POST", (_, 404, 403, 404, 302, 302), pk="catalog_environment", data={"hide": "1"}
    ),
    # Every member sees the team's bookings and books; platform admins see every team's.
    "team-bookings": Row("GET", (_, 404, 200, 404, 200, 200)),
    "team-booking-quote": Row("POST", (_, 404, 200, 404, 200, 403)),
    # Its maker (the team admin here), the team's admins and platform admins cancel it.
    "booking-cancel": Row("POST", (_, 404, 403, 404, 302, 302), pk="booking"),
    "bookings": Row("GET", (_, 403, 403, 403, 403, 200)),
    # Its team's members add a workspace (a refusal is shown on the calendar, 302 too).
    "booking-workspace-add": Row(
        "POST", (_, 404, 302, 404, 302, 403), pk="booking", data={"name": "seat"}
    ),
    "team-webhook-change": Row(
        "POST", (_, 404, 403, 404, 302, 302), pk="webhook", data={"events": "budget"}
    ),
    "team-webhook-test": Row("POST", (_, 404, 403, 404, 302, 302), pk="webhook"),
    "team-webhook-delete": Row("POST", (_, 404, 403, 404, 302, 302), pk="webhook"),
    "team-webhook-log": Row("GET", (_, 404, 403, 404, 200, 200), pk="webhook"),
    "team-spend": Row("GET", (_, 404, 200, 404, 200, 200)),
    # Right-sizing savings: the team's admins (a researcher sees their own advice on the
    # workspace page), and every team's for platform admins.
    "team-savings": Row("GET", (_, 404, 403, 404, 200, 200)),
    "platform-savings": Row("GET", (_, 403, 403, 403, 403, 200)),
    "team-spend-data": Row("GET", (_, 404, 200, 404, 200, 200)),
    "team-spend-reconciliation": Row("GET", (_, 404, 200, 404, 200, 200)),
    "team-spend-csv": Row(
        "GET", (_, 404, 200, 404, 200, 200), data={"start": "2026-11-01", "end": "2026-11-30"}
    ),
    "platform-spend": Row("GET", (_, 403, 403, 403, 403, 200)),
    "platform-spend-reconciliation": Row("GET", (_, 403, 403, 403, 403, 200)),
    "platform-spend-csv": Row(
        "GET", (_, 403, 403, 403, 403, 200), data={"start": "2026-11-01", "end": "2026-11-30"}
    ),
    "audit": Row("GET", (_, 403, 403, 200, 200, 200)),
    # The GPU memory estimate: any signed-in user, flags for their own team (a team they are
    # not in is 404: tests/clusters/test_sizing_view.py).
    "sizing-estimate": Row(
        "GET",
        (_, 200, 200, 200, 200, 200),
        data={"parameters_b": "7", "precision": "fp16", "workload": "inference"},
    ),
    "workspaces:request-mig": Row("GET", (_, 200, 200, 200, 200, 200)),
    "workspaces:request-namespace": Row("GET", (_, 200, 200, 200, 200, 200)),
    # Any registered kind's request page by its kind (PARAMS["kind"];
    # tests/workspaces/test_fourth_kind.py asks it for a kind of its own): the same for every
    # member.
    "workspaces:request-kind": Row("GET", (_, 200, 200, 200, 200, 200)),
    "workspaces:kubeconfig": Row("GET", (_, 404, 200, 404, 200, 200), pk="mig_workspace"),
    # AKS clusters belong to no team: platform admins only.
    "clusters:list": Row("GET", (_, 403, 403, 403, 403, 200)),
    "clusters:detail": Row("GET", (_, 403, 403, 403, 403, 200), pk="cluster"),
    "clusters:team": Row(
        "POST",
        (_, 403, 403, 403, 403, 302),
        pk="cluster",
        data={"team": "{team}"},
    ),
    "clusters:pool-create": Row(
        "POST",
        (_, 403, 403, 403, 403, 302),
        pk="cluster",
        data={
            "name": "mig2g",
            "vm_size": "Standard_NC24ads_A100_v4",
            "node_count": "1",
            "gpu_instance_profile": "MIG2g",
        },
    ),
    "clusters:pools-adoptable": Row("GET", (_, 403, 403, 403, 403, 200), pk="cluster"),
    "clusters:pool-adopt": Row("POST", (_, 403, 403, 403, 403, 302), pk="cluster"),
    "clusters:pool-delete": Row("POST", (_, 403, 403, 403, 403, 302), pk="cluster"),
    # The JSON API (api/): no login redirect, a 401 problem without a token or session; its
    # schema and docs page are public, like any published API's. Outsiders get 404 as above.
    "api-v1:api-root": Row("GET", (404, 404, 404, 404, 404, 404)),
    # Any other path under /api/v1/: a 404 problem for everyone (reversed, it is /api/v1/).
    "api-unknown-route": Row("GET", (404, 404, 404, 404, 404, 404)),
    "api-v1:openapi-json": Row("GET", (200, 200, 200, 200, 200, 200)),
    "api-v1:openapi-view": Row("GET", (200, 200, 200, 200, 200, 200)),
    "api-v1:me": Row("GET", (401, 200, 200, 200, 200, 200)),
    # /api/v1/: anonymous 401 (never a login redirect), strangers 404, as the pages' rules.
    "api-v1:workspace_list": Row("GET", (401, 200, 200, 200, 200, 200)),
    # Requests in the cast's team: its members make one (201); anyone else is refused the team
    # by the form's choices (400), as on the request page.
    "api-v1:workspace_create": Row("POST", (401, 400, 201, 400, 201, 400), data=API_REQUEST),
    "api-v1:workspace_get": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:workspace_delete": Row("DELETE", (401, 404, 202, 404, 202, 202)),
    "api-v1:workspace_stop": Row("POST", (401, 404, 202, 404, 202, 202)),
    # A running workspace cannot be started or retried: a permitted caller gets the conflict.
    "api-v1:workspace_start": Row("POST", (401, 404, 409, 404, 409, 409)),
    "api-v1:workspace_retry": Row("POST", (401, 404, 409, 404, 409, 409)),
    "api-v1:workspace_keep": Row("POST", (401, 404, 202, 404, 202, 202)),
    # Only a request waiting for approval can be withdrawn (409 on this running one), by its
    # owner or a team admin: a platform admin decides requests instead (403).
    "api-v1:workspace_withdraw": Row("POST", (401, 404, 409, 404, 409, 403)),
    "api-v1:workspace_events": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:workspace_telemetry": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:workspace_connect": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:team_list": Row("GET", (401, 200, 200, 200, 200, 200)),
    "api-v1:team_detail": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:offering_list": Row("GET", (401, 200, 200, 200, 200, 200)),
    "api-v1:kind_list": Row("GET", (401, 200, 200, 200, 200, 200)),
    "api-v1:sizing_estimate": Row(
        "POST",
        (401, 200, 200, 200, 200, 200),
        data={"parameters_b": "7", "precision": "bf16", "workload": "inference"},
    ),
    # The savings page's rule: the team's admins and platform admins.
    "api-v1:recommendation_list": Row("GET", (401, 404, 403, 404, 200, 200), query="?team=vision"),
    "api-v1:environment_list": Row(
        "GET", (401, 404, 200, 404, 200, 200), query="?team=vision&kind=vm"
    ),
    "api-v1:environment_add": Row("POST", (401, 404, 403, 404, 201, 201), data=API_ENVIRONMENT),
    # A team's members (and platform admins) see its bookings; its members book.
    "api-v1:booking_list": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:booking_add": Row("POST", (401, 404, 201, 404, 201, 403), data=API_BOOKING),
    "api-v1:booking_cancel_api": Row("POST", (401, 404, 403, 404, 200, 200)),
    "api-v1:booking_seat_add_api": Row(
        "POST", (401, 404, 201, 404, 201, 403), data={"name": "seat", "ssh_public_key": SSH_KEY}
    ),
    "api-v1:approval_list": Row("GET", (401, 403, 403, 403, 403, 200)),
    # The fair queue: a running workspace has no claim window and cannot join the queue (409).
    "api-v1:queue_place": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:queue_claim": Row("POST", (401, 404, 409, 404, 409, 409)),
    "api-v1:queue_join": Row("POST", (401, 404, 409, 404, 409, 409)),
    "api-v1:queue_list": Row("GET", (401, 403, 403, 403, 403, 200)),
    "api-v1:queue_move": Row("POST", (401, 403, 403, 403, 403, 409)),
    "api-v1:autostart_put": Row(
        "PUT", (401, 404, 200, 404, 200, 200), data={"at": "08:30", "timezone": "UTC"}
    ),
    "api-v1:autostart_delete": Row("DELETE", (401, 404, 200, 404, 200, 200)),
    "api-v1:quiet_hours_put": Row(
        "PUT",
        (401, 404, 403, 404, 200, 200),
        data={"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin"},
    ),
    "api-v1:free_now": Row("GET", (401, 404, 200, 404, 200, 200), query="?team=vision"),
    # Team storage: members read it, team admins change shares; a share not deleted cannot be
    # restored (400 to those allowed), and a delete without the name typed is a 400 too.
    "api-v1:storage_get": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:share_create": Row(
        "POST", (401, 404, 403, 404, 201, 201), data={"name": "checkpoints", "size_gib": 100}
    ),
    "api-v1:share_delete": Row("DELETE", (401, 404, 403, 404, 202, 202), query="?confirm=datasets"),
    "api-v1:share_restore": Row("POST", (401, 404, 403, 404, 400, 400)),
    "api-v1:disk_snapshot_delete": Row(
        "DELETE", (401, 404, 202, 404, 202, 202), query="?confirm=ws-kept"
    ),
    "api-v1:disk_snapshot_restore": Row("POST", (401, 404, 400, 404, 400, 400)),
    "api-v1:share_snapshot": Row("POST", (401, 404, 403, 404, 202, 202)),
    "api-v1:workspace_mounts": Row("GET", (401, 404, 200, 404, 200, 200)),
    "api-v1:approval_approve": Row("POST", (401, 404, 403, 404, 403, 200), pk="quota_request"),
    "api-v1:approval_reject": Row("POST", (401, 404, 403, 404, 403, 200), pk="quota_request"),
}
# Parameters other than ``pk``, by name: the cast's team, a decision and an action that
# change nothing in Azure.
PARAMS = {
    "slug": lambda objects: objects["team"].slug,
    "decision": "reject",
    "action": "retry",
    "queue_action": "claim",
    "where": "fair",
    "pool_pk": lambda objects: objects["pool"].pk,
    "kind": "namespace",
    "port": 6006,
    # The API's path parameters.
    "workspace_id": lambda objects: objects["workspace"].pk,
    "approval_id": lambda objects: objects["quota_request"].pk,
    "team": lambda objects: objects["team"].slug,
    "booking_id": lambda objects: objects["booking"].pk,
    "share_id": lambda objects: objects["share"].pk,
    "snapshot_id": lambda objects: objects["disk_snapshot"].pk,
}


def _walk(patterns, prefix="", namespace=""):
    """(full URL name or route, route, parameter names) of every pattern, through includes."""
    for p in patterns:
        route = prefix + str(p.pattern)
        if route.lstrip("^").startswith(SKIPPED_PREFIXES):
            continue
        if isinstance(p, URLResolver):
            ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from _walk(p.url_patterns, route, ns)
        elif isinstance(p, URLPattern):
            name = f"{namespace}{p.name}" if p.name else f"<unnamed {route}>"
            yield name, route, tuple(p.pattern.regex.groupindex)


URLS = {name: params for name, _route, params in _walk(get_resolver().url_patterns)}


def _share(cast, now):
    TeamStorage.objects.create(team=cast.team, quota_gib=10000, account_name="gpvision0001")
    return TeamShare.objects.create(
        team=cast.team,
        name="datasets",
        size_gib=1024,
        azure_name="datasets-000001",
        state=VolumeState.READY,
        created_at=now,
    )


@pytest.fixture
def objects(cast, sim):
    """The objects whose ids fill the URLs: all belong to the cast's ``team``."""
    workspace = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    waiting = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.PENDING_APPROVAL, gpu_model="A100"
    )
    now = timezone.now()
    UserFactory(username="dave")
    cluster, pool = _cluster_and_pool(cast, sim, now)
    return {
        "cluster": cluster,
        "pool": pool,
        "mig_workspace": WorkspaceFactory(
            team=cast.team,
            owner=cast.researcher,
            status=Status.RUNNING,
            kind="mig",
            node_pool=pool,
            namespace="team-vision",
            mig_profile="1g.10gb",
            gpu_slices=1,
        ),
        "team": cast.team,
        "workspace": workspace,
        "catalog_environment": seed_demo_environments(now=now)[0],
        "quota_request": QuotaRequest.objects.create(
            team=cast.team,
            requester=cast.researcher,
            workspace=waiting,
            summary="big",
            over_quota=["over"],
            justification="why",
            price_per_hour=waiting.price_per_hour,
            created_at=now,
            expires_at=now + timedelta(days=7),
        ),
        "increase": TeamQuotaIncrease.objects.create(
            team=cast.team,
            requester=cast.team_admin,
            gpu_model="A100",
            gpus=8,
            justification="grant",
            created_at=now,
        ),
        "notice": Notice.objects.create(user=cast.researcher, text="hello", created_at=now),
        "booking": booking_create(
            actor=cast.team_admin,
            team=cast.team,
            title="Lab",
            offering=OfferingFactory(),
            instances=1,
            starts_at=now + timedelta(days=2),
            ends_at=now + timedelta(days=2, hours=4),
            now=now,
        ),
        "api_token": api_token_create(
            user=cast.researcher, name="ci", scope="read", expires_in_days=30, now=now
        )[0],
        "webhook": webhook_create(
            actor=cast.team_admin,
            team=cast.team,
            kind="slack",
            name="lab",
            url="https://hooks.example.org/services/x",
            events=["budget"],
            now=now,
        )[0],
        "researcher_membership": Membership.objects.get(team=cast.team, user=cast.researcher),
        "share": _share(cast, now),
        "disk_snapshot": _disk_snapshot(cast, now),
        "teammate_membership": Membership.objects.get(team=cast.team, user=cast.teammate),
    }


def _disk_snapshot(cast, now):
    """The researcher's kept snapshot of a deleted VM's OS disk."""
    gone = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.DELETED)
    return DiskSnapshot.objects.create(
        team=cast.team,
        owner=cast.researcher,
        workspace=gone,
        kind=gone.kind,
        name="ws-kept",
        azure_id="/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/snapshots/ws-kept",
        region="eastus",
        vm_size=gone.vm_size,
        size_gb=128,
        created_at=now,
    )


def _cluster_and_pool(cast, sim, now):
    """A registered cluster (it exists in the emulator) with one ready MIG pool."""
    sim.create_aks_cluster(settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "aks")
    cluster = AksCluster.objects.create(
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
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
    return cluster, pool


def _url(name, params, row, objects) -> str:
    kwargs = {}
    for param in params:
        if param == "pk":
            kwargs["pk"] = objects[row.pk].pk
        else:
            value = PARAMS[param]
            kwargs[param] = value(objects) if callable(value) else value
    return reverse(name, kwargs=kwargs)


def row_data(row, objects) -> dict:
    """The row's form data, its placeholders ({team}, {group}) filled in."""
    return {
        k: v.format(team=objects["team"].pk, group=LINK_GROUP) if isinstance(v, str) else v
        for k, v in row.data.items()
    }


def test_every_url_has_an_rbac_row():
    missing = [name for name in URLS if name not in EXPECTED]
    assert not missing, "; ".join(f"add an RBAC rule and an EXPECTED row for {n}" for n in missing)
    stale = sorted(set(EXPECTED) - set(URLS))
    assert not stale, f"EXPECTED rows without a URL: {stale}"


def _answer(client, user, name, role, objects, expected_row=None):
    row = EXPECTED[name]
    url = _url(name, URLS[name], row, objects)
    if user is not None:
        client.force_login(user)
    url += row.query
    data = row_data(row, objects)
    if name.startswith("api-v1:"):
        response = _api_answer(client, row, url, data)
    else:
        send = client.post if row.method == "POST" else client.get
        response = send(url, data) if data else send(url)
    expected = (expected_row or row).statuses[ROLES.index(role)]
    if expected == LOGIN:
        assert response.status_code == 302, f"{row.method} {url} as {role}"
        assert response["Location"].startswith(reverse("login")), f"{url} as {role}"
    else:
        assert response.status_code == expected, f"{row.method} {url} as {role}"


def _api_answer(client, row, url, data):
    """The API takes JSON bodies, and an Idempotency-Key on POST creates."""
    send = {"GET": client.get, "POST": client.post, "PUT": client.put, "DELETE": client.delete}[
        row.method
    ]
    if row.method == "GET":
        return send(url)
    body = json.dumps(data) if data else ""
    key = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}
    return send(url, body, content_type="application/json", **key)


def _wrong_answers(client, cast, name, roles, objects, expected_row=None) -> list[str]:
    """Each role's request of ``name`` in a savepoint rolled back after it; what each role got
    that its EXPECTED status is not, in words (empty when all is as expected)."""
    wrong = []
    for role in roles:
        client.logout()
        user = None if role == "anonymous" else getattr(cast, role)
        try:
            with transaction.atomic():
                _answer(client, user, name, role, objects, expected_row)
                transaction.set_rollback(True)
        except AssertionError as exc:
            wrong.append(f"{role}: {exc}")
    return wrong


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(URLS))
def test_rbac_matrix(client, cast, objects, name):
    if name not in EXPECTED:
        pytest.fail(f"add an RBAC rule and an EXPECTED row for {name}")
    wrong = _wrong_answers(client, cast, name, ROLES, objects)
    assert not wrong, "\n".join(wrong)


# --- the same cast, its roles from Entra ID sign-in ------------------------------------------
# The cast's team and the other team are linked to Entra ID groups; each member of the cast
# loses the membership and staff flag the portal gave it and signs in (teams.entra.user_sign_in,
# the callback's service) with the groups and app roles below. Each must get the answers of
# the EXPECTED row of its role, except where ENTRA_EXPECTED says why not.
TEAM_GROUP, OTHER_GROUP = (
    "3c9e5a10-4b2d-4e6f-8a1b-2c3d4e5f6a01",
    "3c9e5a10-4b2d-4e6f-8a1b-2c3d4e5f6a02",
)
ENTRA_CLAIMS = {  # role -> (the groups claim, the roles claim)
    "outsider": ([OTHER_GROUP], []),
    "researcher": ([TEAM_GROUP], []),
    "other_team_admin": ([OTHER_GROUP], ["Team.Admin"]),
    "team_admin": ([TEAM_GROUP], ["Team.Admin"]),
    "platform_admin": ([], ["Platform.Admin"]),
}
ENTRA_EXPECTED = {
    #                                anon outsider researcher other-admin team-admin platform
    # The researcher's role follows the Team.Admin app role: the team page refuses to change
    # it (the members section with the reason, 200) rather than be undone at the next sign-in.
    "team-member-role": Row("POST", (_, 404, 403, 404, 200, 200)),
}


@pytest.fixture
def entra_cast(cast):
    """The cast, each member's teams and roles now from an Entra ID sign-in."""
    from teams import entra
    from teams.models import Profile, Team

    Team.objects.filter(pk=cast.team.pk).update(entra_group_id=TEAM_GROUP)
    Team.objects.filter(pk=cast.other_team.pk).update(entra_group_id=OTHER_GROUP)
    for n, (role, (groups, app_roles)) in enumerate(ENTRA_CLAIMS.items()):
        user = getattr(cast, role)
        Membership.objects.filter(user=user).delete()
        type(user).objects.filter(pk=user.pk).update(is_staff=False)
        oid = f"4d8f6b21-5c3e-4f70-9b2c-3d4e5f6a7b{n:02d}"
        Profile.objects.update_or_create(user=user, defaults={"signin_object_id": oid})
        claims = {"oid": oid, "preferred_username": f"{user.username}@example.org"}
        signed_in = entra.user_sign_in(
            claims=claims | {"name": user.username, "roles": app_roles},
            groups=groups,
            now=timezone.now(),
        )
        assert signed_in.pk == user.pk
    return cast


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(URLS))
def test_rbac_matrix_for_entra_id_sign_in(client, entra_cast, objects, name):
    roles = list(ENTRA_CLAIMS)
    wrong = _wrong_answers(client, entra_cast, name, roles, objects, ENTRA_EXPECTED.get(name))
    assert not wrong, "\n".join(wrong)
