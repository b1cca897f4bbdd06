"""A fourth workspace kind, made and registered by this module alone (issue 30): a time-sliced
GPU pod, a share (eighths) of one GPU. No product file names it: its backend class, form and
request service are here, and one register() call makes every layer offer it. The kind is
requested through its page and through /api/v1/, and shows in the workspace list, the spend
page, the RBAC matrix (the page of every kind), the API's kinds and OpenAPI document, and its
node pool's capacity.

Each check fails if a layer keeps its own list of the three built-in kinds (a Literal, a
column per kind, choices fixed in a model or a filter, a MIG-else-namespace default)."""

import json
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
import time_machine
from django import forms
from django.utils import timezone

from clusters.models import AksCluster, NodePool, PoolStatus
from clusters.selectors import pool_capacity
from common.validation import TextField
from tests.factories import WorkspaceFactory
from tests.portal import test_rbac_matrix as matrix
from tests.portal.test_rbac_matrix import objects  # noqa: F401 (the matrix's objects)
from workspaces import states
from workspaces.backends import (
    ApiField,
    KindForm,
    Meters,
    PoolUse,
    ResizeChoice,
    RightsizeOptions,
    SizingOffer,
    Words,
    WorkspaceBackend,
    register,
    request_path,
    unregister,
)
from workspaces.chains import Next
from workspaces.forms import MountsFormMixin, clean_workspace_name
from workspaces.models import Workspace
from workspaces.requests import Ask, check_member, workspace_insert
from workspaces.states import BILLABLE_ON_AKS, OPERATION, Status

KIND = "timeslice"
NODE_PRICE = Decimal("3.6730")  # USD/hour of the node whose GPU is shared
SHARES = 8  # a time-sliced GPU is shared by up to 8 pods


class TimeSliceForm(MountsFormMixin):
    """The kind's own request form: the common fields (what to mount included: the mixin)
    and the GPU share it takes."""

    team = forms.ModelChoiceField(queryset=None, empty_label=None)
    name = TextField(label="Workspace name", max_length=40)
    gpu_model = forms.ChoiceField(choices=[("A100", "A100")], label="GPU model")
    share = forms.IntegerField(min_value=1, max_value=SHARES, label="Eighths of a GPU")
    justification = TextField(multiline=True, required=False, max_length=2000)
    request_key = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams

    def clean_name(self) -> str:
        return clean_workspace_name(self.cleaned_data["name"])


def request_time_slice(
    *, user: Any, team: Any, name: str, request_key: Any, justification: str, now: datetime,
    data: Mapping[str, Any], mounts: Any,
) -> Workspace:  # fmt: skip
    """Its request service: ``share`` eighths of a GPU of the model, at that share of the
    node's price, against the team's quota (workspace_insert checks it)."""
    check_member(user=user, team=team)
    share = data["share"]
    fields = {
        "kind": KIND,
        "name": name,
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "price_per_hour": (NODE_PRICE * share / SHARES).quantize(Decimal("0.0001")),
        "gpu_model": data["gpu_model"],
        "gpu_count": share,
    }
    gpus = Fraction(share, SHARES)
    ask = Ask(user, team, request_key, fields, gpus, f"Requested {share}/8", mounts=mounts)
    return workspace_insert(ask=ask, justification=justification, now=now)


def _api_data(values: Mapping[str, Any], form: Any, user: Any) -> dict[str, str]:
    return {"gpu_model": values["gpu_model"], "share": str(values["share"] or "")}


class TimeSliceBackend:
    """The fourth kind: a pod on a time-sliced GPU, made at once (no cloud here)."""

    kind = KIND
    label = "Time-sliced GPU"
    spend_colour = "#805ad5"
    service = "Kubernetes"
    form = KindForm(
        path=KIND,
        name=f"request-{KIND}",
        form_class=TimeSliceForm,
        choices=lambda team: {},
        request=request_time_slice,
        api_fields=(
            ApiField("gpu_model", str, max_length=16, required=True),
            ApiField("share", int, ge=1, le=SHARES, required=True),
        ),
        api_form_data=_api_data,
    )
    # A pod holds its GPUs (gpu_count: eighths here) of its pool while it runs.
    pool_use: PoolUse | None = PoolUse(holding=frozenset({Status.RUNNING}), units_field="gpu_count")
    where = "the cluster"
    error_source = "Kubernetes"
    stop_label = "Stop"
    delete_warning = "The pod"
    disk_snapshots = False  # no OS disk of its own
    hand_over_note = "Its pod is yours now."
    facts_template = "workspaces/kinds/generic_facts.html"
    resizable = False
    connect_template = "workspaces/kinds/generic_connect.html"
    words = Words(
        idle_when="GPU under {threshold}%",
        idle_unmeasured="no reading",
        readings_from="Read from the pod",
        no_reading="No reading yet.",
        sessions="",
        cpu=False,
        waiting_for="Waiting for the cluster",
        nothing_made="Nothing made yet.",
    )
    spot_capable = False
    price_note = "A time-sliced GPU costs its share of the node's hourly price while running."

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """Each operation is done at once: requested -> provisioning -> running, and so on."""
        status = workspace.status
        if status == Status.REQUESTED:
            states.transition(
                workspace_id=workspace.pk, expected=status, to=Status.PROVISIONING,
                now=clock(), reason="Creating the pod",
            )  # fmt: skip
            status = Status.PROVISIONING
        if status in OPERATION:
            states.transition(
                workspace_id=workspace.pk, expected=status, to=OPERATION[status][1],
                now=clock(), reason="Done",
            )  # fmt: skip
        return Next.DONE

    def clean_up_failed_create(self, workspace: Workspace) -> None:
        pass

    def gpu_share(self, workspace: Workspace) -> Fraction:
        return Fraction(workspace.gpu_count, SHARES)

    def size_label(self, workspace: Workspace) -> str:
        return f"{workspace.gpu_count}/{SHARES} of an {workspace.gpu_model}"

    def api_details(self, workspace: Workspace) -> dict[str, Any]:
        return {"eighths": workspace.gpu_count}

    def meters(self, workspace: Workspace) -> Meters:
        return Meters(billable=BILLABLE_ON_AKS, hourly=workspace.price_per_hour)

    def detail_context(self, workspace: Workspace, user: Any) -> dict[str, object]:
        return {}

    def ide_target(self, workspace: Workspace) -> None:
        return None

    def connect_download(self, workspace: Workspace) -> None:
        return None

    def idle_evidence(self, now: datetime) -> list[Any]:
        return []

    def access_to_refresh(self, *, owner: Any) -> list[Any]:
        return []

    def access_refresh(self, workspace: Workspace) -> None:
        pass

    def resize_choices(self, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
        return []

    def sizing_offers(self, *, team: Any) -> list[SizingOffer]:
        return []

    def rightsizing_options(self, *, regions: set[str]) -> RightsizeOptions:
        return {}


_: WorkspaceBackend = TimeSliceBackend()  # mypy checks it against the protocol
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def time_slice():
    """The kind, registered for one test and forgotten after."""
    register(TimeSliceBackend())
    yield
    unregister(KIND)


def _api(client, body):
    return client.post(
        "/api/v1/workspaces", body, content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )  # fmt: skip


def test_it_is_requested_on_its_page_and_runs(client, cast):
    client.force_login(cast.researcher)
    page = client.get(request_path(KIND))
    assert page.status_code == 200
    assert b"Request a Time-sliced GPU" in page.content
    # Every kind's tabs offer it, the VM's page's too.
    assert f'href="{request_path(KIND)}"'.encode() in client.get("/workspaces/new/").content
    sent = client.post(
        request_path(KIND),
        {"team": cast.team.pk, "name": "pod-page", "gpu_model": "A100", "share": 2,
         "request_key": uuid.uuid4()},
    )  # fmt: skip
    assert sent.status_code == 302, sent.content
    ws = Workspace.objects.get(name="pod-page")
    assert (ws.kind, ws.status, ws.size_label) == (KIND, Status.RUNNING, "2/8 of an A100")


def test_it_is_requested_through_the_api_and_listed_there(client, cast):
    client.force_login(cast.researcher)
    kinds = client.get("/api/v1/kinds").json()["items"]
    assert kinds[-1] == {
        "kind": KIND,
        "label": "Time-sliced GPU",
        "fields": [
            {"name": "gpu_model", "type": "string", "required": True},
            {"name": "share", "type": "integer", "required": True},
        ],
    }
    created = _api(client, {"kind": KIND, "team": "vision", "name": "pod-api",
                            "gpu_model": "A100", "share": 3})  # fmt: skip
    assert created.status_code == 201, created.content
    assert created.json()["kind"] == KIND and created.json()["size_label"] == "3/8 of an A100"
    assert created.json()["details"] == {"eighths": 3}  # its own output field
    refused = _api(client, {"kind": KIND, "team": "vision", "name": "too-big",
                            "gpu_model": "A100", "share": 9})  # fmt: skip
    assert refused.status_code == 400 and refused.json()["errors"][0]["loc"][-1] == "share"


def test_the_api_document_names_it_and_an_unknown_kind_is_refused(client, cast):
    from api.main import api

    body = api.get_openapi_schema()["components"]["schemas"]["WorkspaceRequestIn"]
    assert KIND in body["properties"]["kind"]["enum"] and "share" in body["properties"]
    assert {"if": {"properties": {"kind": {"const": KIND}}, "required": ["kind"]},
            "then": {"required": ["gpu_model", "share"]}} in body["allOf"]  # fmt: skip
    client.force_login(cast.researcher)
    unknown = _api(client, {"kind": "tpu", "team": "vision", "name": "x"})
    assert unknown.status_code == 400
    assert unknown["Content-Type"] == "application/problem+json"
    assert unknown.json()["errors"][0]["loc"][-1] == "kind"
    assert not Workspace.objects.exists()


def test_it_shows_in_the_list_and_its_filter(client, cast):
    client.force_login(cast.researcher)
    _api(client, {"kind": KIND, "team": "vision", "name": "listed", "gpu_model": "A100",
                  "share": 1})  # fmt: skip
    page = client.get("/workspaces/?kind=" + KIND).content.decode()
    assert "listed" in page and "1/8 of an A100" in page
    assert f'<option value="{KIND}" selected>Time-sliced GPU</option>' in page


def test_it_has_its_column_on_the_spend_page(client, cast):
    client.force_login(cast.team_admin)
    start = timezone.now().replace(hour=6, minute=0, second=0, microsecond=0)
    with time_machine.travel(start, tick=False):
        _api_as(client, cast, {"kind": KIND, "team": "vision", "name": "spent",
                               "gpu_model": "A100", "share": 4})  # fmt: skip
    with time_machine.travel(start + timedelta(hours=2), tick=False):
        page = client.get(f"/teams/{cast.team.slug}/spend/").content.decode()
        data = json.loads(client.get(f"/teams/{cast.team.slug}/spend/data/").content)
    assert '<th scope="col">Time-sliced GPU</th>' in page
    assert "A time-sliced GPU costs its share" in page  # its price note
    assert "spent" in page  # by workspace
    assert data["kinds"][KIND] == {"label": "Time-sliced GPU", "colour": "#805ad5"}
    assert sum(Decimal(v) for v in data["series"][KIND]) == Decimal("3.67")  # 2 h x 1.8365


def _api_as(client, cast, body):
    client.force_login(cast.researcher)
    created = _api(client, body)
    assert created.status_code == 201, created.content
    client.force_login(cast.team_admin)


def test_its_pods_count_on_their_pools_capacity(cast):
    now = timezone.now()
    cluster = AksCluster.objects.create(
        subscription_id="s", resource_group="rg", name="aks", location="eastus",
        registered_at=now,
    )  # fmt: skip
    pool = NodePool.objects.create(
        cluster=cluster, name="shared", vm_size="Standard_NC24ads_A100_v4", gpu_model="A100",
        gpus_per_node=8, gpu_memory_gib=80, node_count=1, price_per_hour=NODE_PRICE,
        status=PoolStatus.READY, created_at=now, updated_at=now,
    )  # fmt: skip
    for status in (Status.RUNNING, Status.STOPPED):
        WorkspaceFactory(team=cast.team, kind=KIND, node_pool=pool, gpu_count=3, status=status)
    (row,) = pool_capacity(cluster=cluster)
    assert (row.total, row.used) == (8, 3)  # as its backend counts: the running pod's 3


@pytest.mark.parametrize("role", matrix.ROLES)
def test_its_page_answers_as_the_rbac_matrix_says(client, cast, objects, role, monkeypatch):  # noqa: F811
    monkeypatch.setitem(matrix.PARAMS, "kind", KIND)
    user = None if role == "anonymous" else getattr(cast, role)
    matrix._answer(client, user, "workspaces:request-kind", role, objects)
