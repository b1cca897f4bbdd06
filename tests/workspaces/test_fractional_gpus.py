"""Fractional GPU VMs (Azure NVadsA10 v5 vGPU sizes): in the catalog with their real prices,
counted in the A10 quota as exact shares of a GPU, billed, and offered by the emulator."""

import io
import uuid
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from billing.models import Price
from cloudsim.agent_protocol import gpu_model
from cloudsim.skus import load_catalog as sim_catalog
from clusters.services import PoolRequest, pool_problem
from teams.models import GpuQuota
from tests.factories import SSH_KEY, WorkspaceFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.catalog import read_catalog
from workspaces.gpus import format_gpus
from workspaces.models import SizeOffering, Workspace
from workspaces.requests import JustificationNeeded
from workspaces.selectors import quota_check, team_gpus_in_use
from workspaces.states import Status

FRACTIONAL = {
    "Standard_NV6ads_A10_v5": (6, 4, 6, Decimal("55")),
    "Standard_NV12ads_A10_v5": (3, 8, 12, Decimal("110")),
    "Standard_NV18ads_A10_v5": (2, 12, 18, Decimal("220")),
}


@pytest.fixture
def catalog(db):
    call_command("load_catalog", stdout=io.StringIO())


def _offering(vm_size, region="eastus"):
    return SizeOffering.objects.get(vm_size=vm_size, region=region)


def _request(cast, offering, justification=""):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=f"infer-{uuid.uuid4().hex[:6]}",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=timezone.now(),
    )


def _a10_quota(cast, gpus):
    GpuQuota.objects.update_or_create(team=cast.team, gpu_model="A10", defaults={"gpus": gpus})
    cast.team.max_workspaces_per_user = 20
    cast.team.save()


def test_the_catalog_has_the_three_fractional_sizes_as_microsoft_documents_them():
    rows = [r for r in read_catalog() if r.vm_size in FRACTIONAL]
    assert {r.region for r in rows} == {
        "eastus", "eastus2", "northcentralus", "southcentralus", "westus", "westus2", "westus3"
    }  # fmt: skip
    for row in rows:
        partition, memory, vcpus, ram = FRACTIONAL[row.vm_size]
        assert (row.gpu_model, row.gpu_count, row.gpu_partition) == ("A10", 1, partition)
        assert (row.gpu_memory_gib, row.vcpus, row.memory_gib) == (memory, vcpus, ram)
    whole = next(r for r in read_catalog() if r.vm_size == "Standard_NV36ads_A10_v5")
    assert (whole.gpu_partition, whole.gpu_memory_gib) == (1, 24)


def test_their_prices_are_the_cited_retail_prices(catalog):
    # data/azure_fractional_gpu_vms.csv (SkyPilot's catalog, Azure Retail Prices API).
    assert _offering("Standard_NV6ads_A10_v5").price_per_hour == Decimal("0.454")
    assert _offering("Standard_NV12ads_A10_v5", "westus").price_per_hour == Decimal("1.18")
    assert _offering("Standard_NV18ads_A10_v5", "northcentralus").price_per_hour == Decimal("1.92")


def test_shares_and_memory_of_a_fractional_size(catalog):
    nv6, nv18 = _offering("Standard_NV6ads_A10_v5"), _offering("Standard_NV18ads_A10_v5")
    assert nv6.gpu_share == Fraction(1, 6) and nv18.gpu_share == Fraction(1, 2)
    assert (nv6.gpu_memory_gib, nv6.total_gpu_memory_gib) == (4, 4)
    assert nv6.gpu_label == "1/6 A10" and nv6.gpu_summary == "1/6 A10 4 GB"
    nc96 = _offering("Standard_NC96ads_A100_v4")
    assert (nc96.gpu_share, nc96.gpu_memory_gib, nc96.total_gpu_memory_gib) == (4, 80, 320)
    assert nc96.gpu_label == "4 × A100"


def test_six_nv6ads_fit_a_one_gpu_a10_quota_and_a_seventh_does_not(cast, catalog):
    _a10_quota(cast, 1)
    nv6 = _offering("Standard_NV6ads_A10_v5")
    six = [_request(cast, nv6) for _ in range(6)]
    assert all(ws.status == Status.REQUESTED for ws in six)  # within quota: provisioned
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A10"] == 1
    with pytest.raises(JustificationNeeded, match="A10"):
        _request(cast, nv6)
    seventh = _request(cast, nv6, justification="A seventh inference endpoint")
    assert seventh.status == Status.PENDING_APPROVAL
    assert Workspace.objects.filter(status=Status.REQUESTED).count() == 6


def test_shares_of_different_sizes_add_up_exactly(cast, catalog):
    _a10_quota(cast, 1)
    for size in ("Standard_NV6ads_A10_v5", "Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5"):
        assert _request(cast, _offering(size)).status == Status.REQUESTED
    used = team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A10"]
    assert used == Fraction(1, 6) + Fraction(1, 3) + Fraction(1, 2) == 1
    check = quota_check(
        team=cast.team,
        user=cast.researcher,
        gpu_model="A10",
        gpus=_offering("Standard_NV6ads_A10_v5").gpu_share,
        price_per_hour=Decimal("0.454"),
        now=timezone.now(),
    )
    assert check.over  # 1 + 1/6 > 1


def test_whole_and_fractional_a10s_and_stopped_ones_count_right(
    cast, catalog, django_assert_num_queries
):
    for size, status in [
        ("Standard_NV36ads_A10_v5", Status.RUNNING),
        ("Standard_NV6ads_A10_v5", Status.RUNNING),
        ("Standard_NV6ads_A10_v5", Status.PROVISIONING),
        ("Standard_NV12ads_A10_v5", Status.STOPPED),  # holds nothing
    ]:
        offering = _offering(size)
        WorkspaceFactory(
            team=cast.team,
            owner=cast.researcher,
            vm_size=size,
            gpu_model="A10",
            gpu_count=offering.gpu_count,
            gpu_partition=offering.gpu_partition,
            status=status,
        )
    # Two queries whatever the number of workspaces: the sum per partition, and the resizes
    # under way whose target size counts instead (issue 28 #3).
    with django_assert_num_queries(2):
        used = team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A10"]
    assert used == Fraction(4, 3)
    assert format_gpus(used) == "1 1/3"


def test_the_usage_figure_shows_sixths(client, cast, catalog):
    _a10_quota(cast, 1)
    _request(cast, _offering("Standard_NV6ads_A10_v5"))
    assert format_gpus(team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A10"]) == "1/6"
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request")).content.decode()
    assert "5/6 of 1 A10 GPUs left" in page


def test_the_workspace_remembers_its_partition(cast, catalog):
    _a10_quota(cast, 1)
    ws = Workspace.objects.get(pk=_request(cast, _offering("Standard_NV12ads_A10_v5")).pk)
    assert (ws.gpu_model, ws.gpu_count, ws.gpu_partition) == ("A10", 1, 3)
    assert "1/3 A10 8 GB" in ws.events.first().reason


def test_the_offline_price_book_bills_them(db):
    call_command("load_catalog", stdout=io.StringIO())
    out = io.StringIO()
    call_command("sync_prices", offline=True, stdout=out)
    assert "Standard_NV6ads_A10_v5" not in out.getvalue()  # not withdrawn
    assert SizeOffering.objects.get(vm_size="Standard_NV6ads_A10_v5", region="eastus").offered
    prices = Price.objects.filter(sku="Standard_NV6ads_A10_v5", region="eastus")
    assert {(p.spot, p.unit_price) for p in prices} == {
        (False, Decimal("0.454")),
        (True, Decimal("0.1135")),
    }


def test_the_emulator_offers_them_as_azure_does():
    catalog = sim_catalog()
    nv6 = catalog.get("East US", "Standard_NV6ads_A10_v5")
    assert nv6 is not None and (nv6.vcpus, nv6.memory_gb) == (6, 55.0)
    assert nv6.family == "StandardNVADSA10v5Family"
    assert gpu_model("Standard_NV6ads_A10_v5").memory_mib == 4096
    assert gpu_model("Standard_NV36ads_A10_v5").memory_mib == 24564


def test_an_aks_pool_of_a_fractional_size_is_refused(catalog):
    # A namespace's quota and a pool's capacity count whole GPUs (nvidia.com/gpu).
    ask = PoolRequest(name="vgpu", vm_size="Standard_NV6ads_A10_v5", gpu_instance_profile="")
    problem = pool_problem(cluster=SimpleNamespace(location="eastus"), ask=ask)
    assert problem == (
        "Standard_NV6ads_A10_v5 (1/6 A10 4 GB) has a fractional GPU; pools need whole GPUs."
    )


def test_the_admin_list_shows_shares_memory_and_labels(client, cast, catalog):
    client.force_login(cast.platform_admin)
    url = reverse("admin:workspaces_sizeoffering_changelist")
    page = client.get(url, {"q": "NV6ads", "region": "eastus"}).content.decode()
    assert "1/6 A10" in page and "Inference" in page


@pytest.mark.django_db(transaction=True)
def test_a_fractional_vm_is_created_in_the_emulator_and_billed_at_its_price(cast, sim):
    call_command("load_catalog", stdout=io.StringIO())
    _a10_quota(cast, 1)
    ws = Workspace.objects.get(pk=_request(cast, _offering("Standard_NV6ads_A10_v5")).pk)
    assert ws.status == Status.RUNNING
    name = f"ws-{ws.id.hex[:12]}"
    vm = next(v for v in sim.state()["virtualMachines"] if v["name"] == name)
    assert vm["vmSize"] == "Standard_NV6ads_A10_v5"
    assert ws.price_per_hour == Decimal("0.4540")
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A10"] == Fraction(1, 6)
