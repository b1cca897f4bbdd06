"""The pages of MIG slices, namespaces and clusters: what a user sees and the errors they get."""

import uuid

import pytest
from django.urls import reverse

from clusters import aks_services
from clusters.models import AksCluster, NodePool
from tests.clusters.test_aks_workspaces import cluster, four_gpu_offering, make_pool  # noqa: F401
from tests.factories import OfferingFactory
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)


def test_mig_form_lists_profiles_with_free_slices_and_price(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request-mig")).content.decode()
    assert "A100 <code>1g.10gb</code>" in page and "7 of 7" in page
    assert "$0.5247" in page  # 3.6730 / 7


def test_a_team_without_a_cluster_is_told_so(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.outsider)
    page = client.get(reverse("workspaces:request-mig")).content.decode()
    assert "No MIG node pool serves your team yet" in page


def test_a_profile_no_pool_offers_is_a_form_error(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    response = client.post(
        reverse("workspaces:request-mig"),
        {
            "team": cast.team.pk,
            "name": "nb",
            "profile": "A100|3g.40gb",
            "request_key": uuid.uuid4(),
        },
    )
    assert response.status_code == 200
    assert "No node pool offers that MIG profile to your team." in response.content.decode()
    assert not Workspace.objects.exists()


def test_namespace_form_refuses_zero_gpus_and_a_bad_name(client, cast, cluster):  # noqa: F811
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    client.force_login(cast.researcher)
    response = client.post(
        reverse("workspaces:request-namespace"),
        {
            "team": cast.team.pk,
            "name": "-Bad_",
            "pool": pool.pk,
            "gpus": 0,
            "request_key": uuid.uuid4(),
        },
    )
    page = response.content.decode()
    assert "Ensure this value is greater than or equal to 1." in page
    assert "Use 1–40 lower-case letters, digits and hyphens" in page
    assert not Workspace.objects.exists()


def test_pool_form_says_why_a_mig_profile_is_refused(client, cast, cluster):  # noqa: F811
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4", gpu_memory_gib=16)
    client.force_login(cast.platform_admin)
    response = client.post(
        reverse("clusters:pool-create", kwargs={"pk": cluster.pk}),
        {
            "name": "t4",
            "vm_size": "Standard_NC4as_T4_v3",
            "gpu_instance_profile": "MIG1g",
            "node_count": 1,
        },
    )
    assert response.status_code == 400
    assert "has no MIG mode; only A100 and H100 do." in response.content.decode()
    assert not NodePool.objects.exists()


def test_registering_a_missing_cluster_shows_azures_answer(client, cast, sim):
    client.force_login(cast.platform_admin)
    response = client.post(
        reverse("clusters:list"),
        {
            "subscription_id": "00000000-0000-0000-0000-000000000000",
            "resource_group": "rg-gpu-portal",
            "name": "ghost",
        },
    )
    assert "Azure has no AKS cluster ghost" in response.content.decode()
    assert not AksCluster.objects.exists()


def test_pools_table_stops_polling_once_every_pool_is_steady(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.platform_admin)
    url = reverse("clusters:detail", kwargs={"pk": cluster.pk})
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 286
    assert "mig1g" in response.content.decode() and "<h1>" not in response.content.decode()


def test_capacity_page_counts_used_and_free_slices(client, cast, cluster):  # noqa: F811
    from tests.clusters.test_aks_workspaces import request_mig

    make_pool(cast, cluster)
    request_mig(cast)
    request_mig(cast, name="second")
    client.force_login(cast.platform_admin)
    page = client.get(reverse("clusters:list")).content.decode()
    row = page[page.index("mig1g") :]
    row = row[: row.index("</tr>")]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[3:7] == ["7", "2", "5", "0"]  # total, used, free, waiting


def test_a_running_slice_page_shows_how_to_open_it(client, cast, cluster):  # noqa: F811
    from tests.clusters.test_aks_workspaces import request_mig

    make_pool(cast, cluster)
    ws = request_mig(cast)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert 'data-testid="open-jupyterlab"' in page and 'data-testid="open-terminal"' in page
    assert f"port-forward pod/ws-{ws.short_id}-0 6006:6006" in page
    assert "× 1 slice ÷ (7 × 1 GPU per node)" in page
    # alice gave no Entra ID identity: she is told Kubernetes will refuse her port-forward.
    assert 'data-testid="entra-missing"' in page and reverse("account") in page
    client.force_login(cast.teammate)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert 'data-testid="entra-missing"' not in page
    client.force_login(cast.researcher)
    kubeconfig = client.get(reverse("workspaces:kubeconfig", kwargs={"pk": ws.pk}))
    assert kubeconfig["Content-Disposition"].startswith('attachment; filename="kubeconfig-')
    assert b"kubelogin" in kubeconfig.content


@pytest.mark.parametrize("kind", ["mig", "namespace"])
def test_jupyterlabs_token_reaches_no_page_and_no_api_answer(client, cast, cluster, kind):  # noqa: F811
    from tests.clusters.test_aks_workspaces import request_mig, request_namespace

    if kind == "mig":
        make_pool(cast, cluster)
        ws = request_mig(cast)
    else:
        ws = request_namespace(cast, make_pool(cast, cluster, "a100", "", **four_gpu_offering()))
    token = aks_services.jupyter_token(ws)
    for user in (cast.researcher, cast.team_admin):  # Its owner, who acts on it: nor them.
        client.force_login(user)
        page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
        assert ws.name in page and token not in page
        for path in ("", "/connect"):
            answer = client.get(f"/api/v1/workspaces/{ws.pk}{path}")
            assert answer.status_code == 200 and token not in answer.content.decode()
    client.force_login(cast.researcher)
    connect = client.get(f"/api/v1/workspaces/{ws.pk}/connect").json()
    assert connect["jupyterlab_url"].endswith(f"host={ws.pk.hex}&next=%2Flab")
    assert connect["terminal_url"].endswith(f"host={ws.pk.hex}&next=%2F_portal%2Fterminal")


def test_the_account_page_records_the_entra_identity_the_slices_grant(client, cast, cluster, sim):  # noqa: F811
    from teams.models import AuditEntry, Profile
    from tests.clusters.test_aks_workspaces import request_mig

    make_pool(cast, cluster)
    ws = request_mig(cast)
    client.force_login(cast.researcher)
    assert "User principal name" in client.get(reverse("account")).content.decode()
    refused = client.post(reverse("account"), {"entra_upn": "alice", "entra_object_id": "x"})
    page = refused.content.decode()
    assert "Enter a user principal name" in page and "Enter a valid UUID" in page
    oid = "a11ce000-0000-4000-8000-00000000a11c"
    saved = client.post(
        reverse("account"), {"entra_upn": "alice@contoso.com", "entra_object_id": oid}
    )
    assert saved.status_code == 302 and saved["Location"] == reverse("account")
    profile = Profile.objects.get(user=cast.researcher)
    assert (str(profile.entra_object_id), profile.entra_upn) == (oid, "alice@contoso.com")
    entry = AuditEntry.objects.get(action="entra_identity_set")
    assert entry.actor == cast.researcher and entry.after["entra_upn"] == "alice@contoso.com"
    # The running slice's owner binding names her now, and its page no longer warns.
    binding = next(
        b
        for b in sim.state()["kubernetes"]["rolebindings"]
        if b["name"] == f"ws-{ws.short_id}-owner"
    )
    assert [s["name"] for s in binding["subjects"]] == ["alice@contoso.com", oid]
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert 'data-testid="entra-missing"' not in page
