"""/api/v1/approvals: platform admins list and decide the requests above quota, as on the
approvals page; anyone else gets 403; a second decision is a 409."""

import uuid

import pytest

from teams.models import Decision, QuotaRequest
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db
JSON = "application/json"


@pytest.fixture
def waiting(client, cast):
    """A request above the team's A100 quota (8 GPUs asked, 4 allowed), made through the API."""
    OfferingFactory(vm_size="Standard_ND96asr_v4", gpu_count=8, price_per_hour="27.1970")
    client.force_login(cast.researcher)
    body = {
        "kind": "vm",
        "team": "vision",
        "name": "big-run",
        "vm_size": "Standard_ND96asr_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
        "justification": "the paper's deadline",
    }
    response = client.post(
        "/api/v1/workspaces",
        body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert response.json()["status"] == "pending_approval"
    client.logout()
    return QuotaRequest.objects.get(workspace_id=response.json()["id"])


def test_the_queue_shows_the_request_with_its_workspace(client, cast, waiting):
    client.force_login(cast.platform_admin)
    body = client.get("/api/v1/approvals").json()
    assert body["count"] == 1 and body["pages"] == 1 and body["next"] is None
    item = body["items"][0]
    assert item["id"] == waiting.pk and item["team"] == "vision" and item["requester"] == "alice"
    assert item["justification"] == "the paper's deadline"
    assert item["workspace"]["name"] == "big-run" and item["price_per_hour"] == "27.1970"
    assert item["over"] and item["expires_at"].endswith("Z")


def test_the_queue_filters_and_pages(client, cast, waiting):
    client.force_login(cast.platform_admin)
    assert client.get("/api/v1/approvals?team=nlp").json()["count"] == 0
    assert client.get("/api/v1/approvals?page=2").json()["items"] == []
    assert client.get("/api/v1/approvals?page_size=0").status_code == 400


@pytest.mark.parametrize("who", ["researcher", "team_admin", "outsider"])
def test_only_platform_admins_see_the_queue(client, cast, waiting, who):
    client.force_login(getattr(cast, who))
    response = client.get("/api/v1/approvals")
    assert response.status_code == 403 and "platform admins" in response.json()["detail"]


def test_approve_queues_the_workspace_then_a_second_decision_is_409(client, cast, waiting):
    client.force_login(cast.platform_admin)
    url = f"/api/v1/approvals/{waiting.pk}/approve"
    response = client.post(url, {"reason": "fine"}, content_type="application/json")
    assert response.json() == {"id": waiting.pk, "decision": "approved"}
    assert Workspace.objects.get(pk=waiting.workspace_id).status == Status.REQUESTED
    again = client.post(f"/api/v1/approvals/{waiting.pk}/reject", content_type=JSON)
    assert again.status_code == 409


def test_reject_closes_the_workspace_with_the_reason(client, cast, waiting):
    client.force_login(cast.platform_admin)
    response = client.post(
        f"/api/v1/approvals/{waiting.pk}/reject",
        {"reason": "too big"},
        content_type="application/json",
    )
    assert response.json()["decision"] == "rejected"
    waiting.refresh_from_db()
    assert waiting.decision == Decision.REJECTED and waiting.comment == "too big"
    assert Workspace.objects.get(pk=waiting.workspace_id).status == Status.DELETED


@pytest.mark.parametrize(
    "body", [{"reason": "x\x00"}, {"reason": "x" * 2001}, {"reason": ["no"]}, "not json"]
)
def test_a_bad_reason_is_400_and_decides_nothing(client, cast, waiting, body):
    client.force_login(cast.platform_admin)
    response = client.post(
        f"/api/v1/approvals/{waiting.pk}/approve", body, content_type="application/json"
    )
    assert response.status_code == 400
    waiting.refresh_from_db()
    assert waiting.decision == Decision.PENDING


@pytest.mark.parametrize("pk", [0, 99999, 2**40])
def test_an_unknown_request_is_404(client, cast, pk):
    client.force_login(cast.platform_admin)
    assert client.post(f"/api/v1/approvals/{pk}/approve", content_type=JSON).status_code == 404


def test_a_team_admin_may_not_decide(client, cast, waiting):
    client.force_login(cast.team_admin)
    response = client.post(f"/api/v1/approvals/{waiting.pk}/approve", content_type=JSON)
    assert response.status_code == 403
