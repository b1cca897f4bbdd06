"""GET /sizing/estimate: the JSON answer, its fits list (price order, per region, quota and
budget flags as the request measures them), bad input, outsiders, and the htmx panel."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from clusters.models import AksCluster, ClusterTeam, NodePool, PoolStatus
from teams.models import GpuQuota
from tests.factories import OfferingFactory, WorkspaceFactory
from workspaces.states import Status

URL = "/sizing/estimate"
ISSUE_QUERY = "?parameters_b=7&precision=fp16&workload=inference"


@pytest.fixture
def catalog(db):
    """Sizes in two regions: a T4 (16 GiB), an A10 (24 GiB), A100s of 80 GiB, 1 and 4 GPUs."""
    rows = [
        ("Standard_NC4as_T4_v3", "eastus", "T4", 1, 16, "0.5260"),
        ("Standard_NV36ads_A10_v5", "eastus", "A10", 1, 24, "3.2000"),
        ("Standard_NC24ads_A100_v4", "eastus", "A100", 1, 80, "3.6730"),
        ("Standard_NC96ads_A100_v4", "eastus", "A100", 4, 80, "14.6920"),
        ("Standard_NC24ads_A100_v4", "westeurope", "A100", 1, 80, "4.0400"),
        ("Standard_NC4as_T4_v3", "westeurope", "T4", 1, 16, "0.5900"),
    ]
    for vm_size, region, model, count, mem, price in rows:
        OfferingFactory(
            vm_size=vm_size,
            region=region,
            gpu_model=model,
            gpu_count=count,
            gpu_memory_gib=mem,
            price_per_hour=Decimal(price),
        )
    OfferingFactory(vm_size="Standard_NC48ads_A100_v4", gpu_count=2, offered=False)


def _get(client, query=ISSUE_QUERY, **headers):
    return client.get(URL + query, **headers)


def test_the_issues_query_answers_json_with_gpu_memory_and_fits_by_price(client, cast, catalog):
    client.force_login(cast.researcher)
    response = _get(client)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    doc = response.json()
    # 14 GB of weights + 20 % + 0.5 GiB of CUDA context.
    assert doc["gpu_memory_gib"] == 16.15
    assert doc["breakdown_gib"]["weights"] == 13.04
    assert set(doc["breakdown_gib"]) == {
        "weights",
        "kv_cache",
        "gradients",
        "optimizer_states",
        "activations",
        "overhead",
    }
    assert doc["formula"] and doc["source"] and doc["fit_margin_percent"] == 10
    prices = [Decimal(f["usd_per_hour"]) for f in doc["fits"]]
    assert prices == sorted(prices)
    names = [(f["name"], f["region"]) for f in doc["fits"]]
    # The T4's 16 GiB less 10 % is 14.4 GiB: too small for 16.15 GiB; A10 (24 GiB) fits.
    assert ("Standard_NC4as_T4_v3", "eastus") not in names
    assert names[0] == ("Standard_NV36ads_A10_v5", "eastus")
    assert ("Standard_NC24ads_A100_v4", "westeurope") in names
    assert all(f["vm_size"] != "Standard_NC48ads_A100_v4" for f in doc["fits"])  # not offered
    first = doc["fits"][0]
    assert first["usd_per_hour"] == "3.2000"  # Decimal as a string
    assert first["gpu_memory_gib_per_gpu"] == 24 and first["gpu_memory_gib_total"] == 24
    assert first["quota_ok"] is False  # the cast's team has no A10 quota
    assert first["budget_ok"] is True
    assert doc["team"] == "vision"


def test_the_cheapest_n_per_region(client, cast, catalog):
    client.force_login(cast.researcher)
    doc = _get(client, ISSUE_QUERY + "&per_region=1").json()
    assert [(f["name"], f["region"]) for f in doc["fits"]] == [
        ("Standard_NV36ads_A10_v5", "eastus"),
        ("Standard_NC24ads_A100_v4", "westeurope"),
    ]
    doc = _get(client, ISSUE_QUERY + "&region=westeurope").json()
    assert {f["region"] for f in doc["fits"]} == {"westeurope"}


def test_a_large_model_fits_only_across_several_gpus(client, cast, catalog):
    client.force_login(cast.researcher)
    doc = _get(client, "?preset=llama-3-70b&precision=bf16&workload=inference").json()
    # 70.6 B x 2 bytes = 131.5 GiB of weights: only the 4 x 80 GiB size holds it.
    assert [f["name"] for f in doc["fits"]] == ["Standard_NC96ads_A100_v4"]
    assert doc["fits"][0]["gpu_memory_gib_total"] == 320
    assert doc["inputs"]["layers"] == 80 and doc["inputs"]["kv_heads"] == 8
    assert doc["preset"]["config"].endswith("Meta-Llama-3-70B/blob/main/config.json")


def test_quota_and_budget_flags_change_when_the_team_has_used_them_up(client, cast, catalog):
    client.force_login(cast.researcher)
    url = ISSUE_QUERY + "&region=eastus"

    def a100():
        doc = _get(client, url).json()
        return next(f for f in doc["fits"] if f["name"] == "Standard_NC24ads_A100_v4")

    assert (a100()["quota_ok"], a100()["budget_ok"]) == (True, True)
    # The team's 4 A100s all held by running workspaces: the GPU quota is used up.
    WorkspaceFactory(
        team=cast.team, owner=cast.teammate, gpu_model="A100", gpu_count=4, status=Status.RUNNING
    )
    fit = a100()
    assert fit["quota_ok"] is False and fit["budget_ok"] is True
    assert any("A100" in reason for reason in fit["over"])
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=8)
    assert a100()["quota_ok"] is True
    # A budget of $1 a month: no size lasts the month.
    cast.team.monthly_budget = Decimal(1)
    cast.team.save()
    fit = a100()
    assert fit["quota_ok"] is True and fit["budget_ok"] is False


Q = "?parameters_b=7&precision=fp16&workload=inference"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=0&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=-3&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=2001&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=NaN&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=Infinity&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=1e999999&precision=fp16&workload=inference", "parameters_b"),
        ("?parameters_b=7&precision=fp64&workload=inference", "precision"),
        ("?parameters_b=7&precision=fp16&workload=pretraining", "workload"),
        (Q + "&context_length=1048577", "context_length"),
        (Q + "&batch=1025", "batch"),
        (Q + "&batch=x", "batch"),
        (Q + "&layers=32", "hidden_size"),
        (Q + "&layers=32&hidden_size=4096&kv_heads=5", "kv_heads"),
        (Q + "&team=%00", "team"),
        (Q + "&region=East%20US", "region"),
        ("?parameters_b=7&precision=int4&workload=full_finetune", "precision"),
        ("?parameters_b=7&precision=bf16&workload=lora&trainable_percent=0", "trainable_percent"),
        (Q + "&preset=gpt-5", "preset"),
    ],
)
def test_bad_input_is_a_400_with_field_errors_in_json(client, cast, query, field):
    client.force_login(cast.researcher)
    response = _get(client, query)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert field in response.json()["errors"]


def test_a_team_the_user_is_not_in_is_404_whether_or_not_it_exists(client, cast, catalog):
    client.force_login(cast.researcher)
    assert _get(client, ISSUE_QUERY + "&team=nlp").status_code == 404
    assert _get(client, ISSUE_QUERY + f"&team={cast.other_team.pk}").status_code == 404
    assert _get(client, ISSUE_QUERY + "&team=no-such-team").status_code == 404
    assert _get(client, ISSUE_QUERY + "&team=vision").json()["team"] == "vision"
    assert _get(client, ISSUE_QUERY + f"&team={cast.team.pk}").json()["team"] == "vision"


def test_a_small_model_fits_a_fractional_a10_counted_as_its_share(client, cast, catalog):
    # Standard_NV6ads_A10_v5: 1/6 of an A10 with 4 GiB (Microsoft's NVadsA10 v5 sizes).
    OfferingFactory(
        vm_size="Standard_NV6ads_A10_v5",
        gpu_model="A10",
        gpu_partition=6,
        gpu_memory_gib=4,
        price_per_hour=Decimal("0.4540"),
    )
    GpuQuota.objects.create(team=cast.team, gpu_model="A10", gpus=1)
    client.force_login(cast.researcher)
    # 1 B in FP16: 2 GB + 20 % + 0.5 GiB = 2.74 GiB, within 90 % of 4 GiB.
    doc = _get(client, "?parameters_b=1&precision=fp16&workload=inference").json()
    assert doc["gpu_memory_gib"] == 2.74
    fit = doc["fits"][0]
    assert (fit["name"], fit["gpu_share"], fit["gpu_memory_gib_total"]) == (
        "Standard_NV6ads_A10_v5",
        "1/6",
        4,
    )
    assert fit["suits"] == "inference" and fit["quota_ok"] is True
    # 7 B does not: the smallest fit is again the whole A10.
    doc = _get(client, ISSUE_QUERY).json()
    assert "Standard_NV6ads_A10_v5" not in [f["name"] for f in doc["fits"]]


def test_signed_out_users_are_sent_to_sign_in(client, db):
    response = _get(client)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_mig_profiles_of_the_teams_pools_are_offered_with_their_share(client, cast, catalog):
    now = timezone.now()
    cluster = AksCluster.objects.create(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="rg",
        name="aks",
        location="eastus",
        registered_at=now,
    )
    ClusterTeam.objects.create(cluster=cluster, team=cast.team, namespace="team-vision")
    for name, profile in (("mig1g", "MIG1g"), ("mig3g", "MIG3g")):
        NodePool.objects.create(
            cluster=cluster,
            name=name,
            vm_size="Standard_NC24ads_A100_v4",
            gpu_model="A100",
            gpus_per_node=1,
            gpu_memory_gib=80,
            gpu_instance_profile=profile,
            node_count=1,
            price_per_hour=Decimal("3.6730"),
            status=PoolStatus.READY,
            created_at=now,
            updated_at=now,
        )
    client.force_login(cast.researcher)
    # 3 B in FP16: 6 GB + 20 % + 0.5 GiB = 7.21 GiB; a 1g.10gb slice holds 9 GiB of it.
    doc = _get(client, "?parameters_b=3&precision=fp16&workload=inference").json()
    fit = doc["fits"][0]
    assert (fit["kind"], fit["mig_profile"], fit["region"]) == ("mig", "1g.10gb", "eastus")
    assert fit["gpu_share"] == "1/7" and fit["usd_per_hour"] == "0.5247"  # 3.6730 / 7
    assert fit["quota_ok"] is True and fit["request_url"] == reverse("workspaces:request-mig")
    # Another team sees none of these pools.
    client.force_login(cast.outsider)
    doc = _get(client, "?parameters_b=3&precision=fp16&workload=inference").json()
    assert all(f["kind"] != "mig" for f in doc["fits"])


def test_the_htmx_panel_gets_the_breakdown_and_marks_allowed_sizes(client, cast, catalog):
    client.force_login(cast.researcher)
    response = _get(client, ISSUE_QUERY + "&region=eastus", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html  # a partial
    assert "16.15 GiB" in html and "Transformer Math 101" in html and "KV cache" in html
    assert "Allowed" in html and "Needs approval" in html  # A100 allowed, A10 without quota
    bad = _get(client, "?parameters_b=-1&precision=fp16&workload=inference", HTTP_HX_REQUEST="true")
    assert bad.status_code == 200 and "alert-danger" in bad.content.decode()


def test_a_browser_gets_the_full_page_and_the_request_form_has_the_panel(client, cast, catalog):
    client.force_login(cast.researcher)
    page = _get(client, HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 200 and "<html" in page.content.decode()
    assert "16.15 GiB" in page.content.decode()
    empty = client.get(URL, HTTP_ACCEPT="text/html")
    assert empty.status_code == 200 and 'id="estimate-form"' in empty.content.decode()
    form = client.get(reverse("workspaces:request")).content.decode()
    assert 'id="estimate-form"' in form and f'hx-get="{URL}"' in form
