"""/api/v1/workspaces as a caller sees it: the list with the UI's filters and paging, one
workspace with ETags, requests (idempotent, same result as the HTML form), actions, history,
telemetry and connect info; hostile bodies get 400 problems, never 500."""

import threading
import uuid

import pytest
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from teams.models import Membership
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db
URL = "/api/v1/workspaces"


def _post(client, body, key=None, url=URL):
    headers = {"HTTP_IDEMPOTENCY_KEY": str(key or uuid.uuid4())}
    return client.post(url, body, content_type="application/json", **headers)


def _vm_body(**extra):
    body = {
        "kind": "vm",
        "team": "vision",
        "name": "llm-finetune",
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
    }
    return body | extra


@pytest.fixture
def alice(client, cast):
    OfferingFactory()
    client.force_login(cast.researcher)
    return client


# --- the list ---------------------------------------------------------------------------------


def test_list_shows_only_the_callers_teams_with_the_documented_shape(alice, cast):
    mine = WorkspaceFactory(team=cast.team, owner=cast.teammate, status=Status.RUNNING)
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider)
    body = alice.get(URL).json()
    assert body["count"] == 1 and body["page"] == 1 and body["pages"] == 1
    assert body["next"] is None and body["previous"] is None
    item = body["items"][0]
    assert item["id"] == str(mine.pk) and item["team"] == "vision" and item["owner"] == "carol"
    assert item["status"] == "running" and item["status_label"] == "Running"
    assert item["price_per_hour"] == "3.6730" and item["url"] == f"{URL}/{mine.pk}"
    assert item["created_at"].endswith("Z")


def test_list_filters_as_the_page_does(alice, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="alpha", status=Status.RUNNING)
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="beta", status=Status.STOPPED)
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="gone", status=Status.DELETED)
    names = lambda q: [w["name"] for w in alice.get(URL + q).json()["items"]]  # noqa: E731
    assert names("?status=running") == ["alpha"]
    assert names("?q=bet") == ["beta"]
    assert names("?sort=name") == ["alpha", "beta"]
    assert names("?deleted=1&sort=name") == ["alpha", "beta", "gone"]


def test_list_ref_names_a_workspace_by_team_and_name_name_or_id_prefix(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.teammate, name="exp", status=Status.RUNNING)
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="exp")
    ids = lambda ref: [w["id"] for w in alice.get(URL, {"ref": ref}).json()["items"]]  # noqa: E731
    for ref in ("exp", "vision/exp", str(ws.pk)[:4], str(ws.pk)[:13], str(ws.pk).upper()):
        assert ids(ref) == [str(ws.pk)], ref
    assert ids("ex") == ids("nlp/exp") == ids(str(ws.pk)[:3]) == []
    for bad in ("", "a\x00b", "x" * 101):
        refused = alice.get(URL, {"ref": bad})
        assert refused.status_code == 400 and refused.json()["errors"][0]["loc"] == ["query", "ref"]


def test_list_pages_with_next_and_previous(alice, cast):
    for i in range(5):
        WorkspaceFactory(team=cast.team, owner=cast.researcher, name=f"w{i}")
    first = alice.get(URL + "?sort=name&page_size=2").json()
    assert first["count"] == 5 and first["pages"] == 3
    second = alice.get(first["next"]).json()
    assert [w["name"] for w in second["items"]] == ["w2", "w3"]
    assert alice.get(second["previous"]).json()["items"] == first["items"]
    assert alice.get(URL + "?page=9").json()["items"] == []


@pytest.mark.parametrize(
    "query",
    ["?status=exploded", "?team=nlp", "?page=0", "?page_size=201", "?page=x", "?q=a%00b"],
)
def test_list_refuses_bad_query_values_with_400(alice, cast, query):
    response = alice.get(URL + query)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"][0]["loc"][0] == "query"


def test_list_query_count_does_not_grow_with_page_size(alice, cast):
    for _ in range(30):
        WorkspaceFactory(team=cast.team, owner=cast.researcher)
    counts = []
    for size in (2, 30):
        with CaptureQueriesContext(connection) as queries:
            assert alice.get(f"{URL}?page_size={size}").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_list_etag_answers_304_until_a_workspace_changes(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    etag = alice.get(URL)["ETag"]
    assert alice.get(URL, HTTP_IF_NONE_MATCH=etag).status_code == 304
    assert alice.get(URL + "?status=running", HTTP_IF_NONE_MATCH=etag).status_code == 200
    Workspace.objects.filter(pk=ws.pk).update(
        status=Status.STOPPING, updated_at=ws.updated_at.replace(year=2030)
    )
    assert alice.get(URL, HTTP_IF_NONE_MATCH=etag).status_code == 200


# --- one workspace ----------------------------------------------------------------------------


def test_get_answers_etag_then_304(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher)
    first = alice.get(f"{URL}/{ws.pk}")
    assert first.status_code == 200 and first.json()["name"] == ws.name
    again = alice.get(f"{URL}/{ws.pk}", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304 and again.content == b""


def test_another_teams_workspace_is_404_problem(alice, cast):
    theirs = WorkspaceFactory(team=cast.other_team, owner=cast.outsider)
    response = alice.get(f"{URL}/{theirs.pk}")
    assert response.status_code == 404 and response.json()["status"] == 404
    assert alice.post(f"{URL}/{theirs.pk}/stop").status_code == 404


def test_events_list_the_history(alice, cast, client):
    response = _post(alice, _vm_body())
    events = alice.get(f"{URL}/{response.json()['id']}/events").json()["items"]
    assert events[0]["to_status"] == "requested" and events[0]["actor"] == "alice"
    assert "Standard_NC24ads_A100_v4" in events[0]["reason"]


def test_telemetry_before_any_heartbeat(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    body = alice.get(f"{URL}/{ws.pk}/telemetry").json()
    assert body["heartbeat_at"] is None and body["gpus"] == [] and body["idle"] is None
    assert len(body["sparkline"]) == 96 and body["bucket_minutes"] == 15


def test_connect_of_a_running_vm_gives_the_ssh_command(alice, cast):
    ws = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.RUNNING, private_ip="10.0.0.7"
    )
    assert alice.get(f"{URL}/{ws.pk}/connect").json() == {
        "ssh_user": "researcher",
        "host": "10.0.0.7",
        "ssh_command": "ssh researcher@10.0.0.7",
        "kubeconfig": None,
        # Made from no environment, it runs no JupyterLab (tests/cli/test_cli.py: one that does).
        "jupyterlab_url": None,
        "vscode_url": None,
        "terminal_url": None,
        "shared_ports": [],
    }


def test_a_vm_without_an_ssh_key_is_requested_and_connects_by_the_browser_only(alice, cast):
    made = _post(alice, _vm_body(ssh_public_key=""))  # alice never gave a key before
    assert made.status_code == 201
    ws = Workspace.objects.get(pk=made.json()["id"])
    assert ws.ssh_public_key == ""
    Workspace.objects.filter(pk=ws.pk).update(status=Status.RUNNING, private_ip="10.0.0.7")
    info = alice.get(f"{URL}/{ws.pk}/connect").json()
    assert (info["host"], info["ssh_user"], info["ssh_command"]) == ("10.0.0.7", None, None)


# --- requests ---------------------------------------------------------------------------------


def test_request_creates_then_the_same_key_returns_the_same_workspace(alice, cast):
    key = uuid.uuid4()
    first = _post(alice, _vm_body(), key)
    assert first.status_code == 201
    assert first.json()["status"] == "requested" and first.json()["price_per_hour"] == "3.6730"
    again = _post(alice, _vm_body(name="other"), key)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert Workspace.objects.count() == 1


def test_request_through_the_api_is_the_request_through_the_form(alice, cast):
    api = _post(alice, _vm_body(name="via-api")).json()
    form = {
        "team": cast.team.pk,
        "name": "via-form",
        "region": "eastus",
        "offering": OfferingFactory().pk,
        "ssh_public_key": SSH_KEY,
        "request_key": uuid.uuid4(),
    }
    assert alice.post(reverse("workspaces:request"), form).status_code == 302
    page = Workspace.objects.get(name="via-form")
    assert (api["status"], api["price_per_hour"], api["vm_size"], api["gpu_model"]) == (
        page.status,
        str(page.price_per_hour),
        page.vm_size,
        page.gpu_model,
    )


def test_above_quota_needs_a_justification_then_waits_for_approval(alice, cast):
    OfferingFactory(vm_size="Standard_ND96asr_v4", gpu_count=8, price_per_hour="27.1970")
    big = _vm_body(vm_size="Standard_ND96asr_v4")
    refused = _post(alice, big)
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["loc"] == ["body", "justification"]
    waiting = _post(alice, big | {"justification": "a deadline"})
    assert waiting.status_code == 201 and waiting.json()["status"] == "pending_approval"


def test_a_taken_name_is_409(alice, cast):
    WorkspaceFactory(team=cast.team, owner=cast.teammate, name="llm-finetune")
    response = _post(alice, _vm_body())
    assert response.status_code == 409 and "llm-finetune" in response.json()["detail"]


def test_another_users_key_is_409(alice, cast):
    theirs = WorkspaceFactory(team=cast.team, owner=cast.teammate)
    assert _post(alice, _vm_body(), theirs.request_key).status_code == 409


@pytest.mark.parametrize("key", ["", "not-a-uuid", "x" * 5000])
def test_request_without_a_uuid_key_is_400(alice, cast, key):
    response = alice.post(
        URL, _vm_body(), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]


@pytest.mark.parametrize(
    "change",
    [
        {"name": "bad\x00name"},
        {"name": "x" * 100_000},
        {"name": 12},
        {"kind": "mainframe"},
        {"team": "nlp"},
        {"team": ["vision"]},
        {"vm_size": "Standard_Nope"},
        {"spot": "maybe"},
        {"max_price": "-1", "accept_equivalents": True},
        {"ssh_public_key": "-----BEGIN OPENSSH PRIVATE KEY-----"},
        {"justification": "\u202eevil"},
    ],
)
def test_hostile_bodies_get_400_and_make_nothing(alice, cast, change):
    response = _post(alice, _vm_body() | change)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"]
    assert not Workspace.objects.exists()


def test_not_json_at_all_is_400(alice, cast):
    response = alice.post(
        URL, b"\xff{", content_type="application/json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert response.status_code == 400


# --- actions ----------------------------------------------------------------------------------


def test_stop_answers_202_then_stopping_again_is_409(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    response = alice.post(f"{URL}/{ws.pk}/stop")
    assert response.status_code == 202 and response.json()["status"] == "stopping"
    again = alice.post(f"{URL}/{ws.pk}/stop")
    assert again.status_code == 409 and again.json()["detail"]


def test_a_teammate_may_not_stop_anothers_workspace(client, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    client.force_login(cast.teammate)
    response = client.post(f"{URL}/{ws.pk}/stop")
    assert response.status_code == 403
    assert "owner or a team admin" in response.json()["detail"]


def test_delete_answers_202(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    response = alice.delete(f"{URL}/{ws.pk}")
    assert response.status_code == 202 and response.json()["status"] == "deleting"


def test_keep_running_a_stopped_workspace_is_409(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    assert alice.post(f"{URL}/{ws.pk}/keep").status_code == 409


def test_keep_running_answers_202(alice, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    response = alice.post(f"{URL}/{ws.pk}/keep")
    assert response.status_code == 202 and ws.extensions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_request_runs_in_the_emulator_then_stops(client, cast, sim):
    OfferingFactory()
    client.force_login(cast.researcher)
    created = _post(client, _vm_body()).json()
    ws = client.get(created["url"]).json()
    assert ws["status"] == "running" and ws["private_ip"]
    conn = client.get(created["url"] + "/connect").json()
    assert conn["ssh_command"] == f"ssh researcher@{ws['private_ip']}"
    assert client.post(created["url"] + "/stop").status_code == 202
    assert client.get(created["url"]).json()["status"] == "stopped"


# --- Idempotency-Key repeats ------------------------------------------------------------------


def test_a_repeat_after_leaving_the_team_is_404_and_shows_nothing(alice, cast):
    key = uuid.uuid4()
    first = _post(alice, _vm_body(), key)
    assert first.status_code == 201
    Membership.objects.filter(team=cast.team, user=cast.researcher).delete()
    repeat = _post(alice, _vm_body(), key)
    assert repeat.status_code == 404
    assert repeat["Content-Type"] == "application/problem+json"
    text = repeat.content.decode()
    assert "llm-finetune" not in text and first.json()["id"] not in text


@pytest.mark.django_db(transaction=True)
def test_concurrent_repeats_of_one_key_make_one_workspace_one_201_and_200s(cast, sim):
    OfferingFactory()
    key, answers = uuid.uuid4(), []
    clients = [Client() for _ in range(6)]
    for c in clients:
        c.force_login(cast.researcher)
    barrier = threading.Barrier(len(clients))

    def one(c):
        try:
            barrier.wait()
            answers.append(_post(c, _vm_body(), key).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(answers) == [200, 200, 200, 200, 200, 201]
    assert Workspace.objects.filter(request_key=key).count() == 1
