"""A VM workspace made from an environment, in the emulator: the default of each GPU family
is created with the right driver method and sets up until Ready (tests/environments/
test_setting_up.py plays the agent live), and a failed driver extension fails it with Azure's
exit code. Celery runs eagerly; only Azure is faked."""

import base64
import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import timezone
from gpuportal.app import app
from typer.testing import CliRunner

from cloud import azure_extensions
from cloud.clients import compute_client
from environments.demo import seed_demo_environments
from teams.models import GpuQuota
from teams.tokens import api_token_create
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
# size -> (GPU model, GPUs, partition, GPU memory GiB, default environment, driver method)
FAMILIES = {
    "Standard_NC4as_T4_v3": ("T4", 1, 1, 16, "pytorch-cuda", "preinstalled"),
    "Standard_NV12ads_A10_v5": ("A10", 1, 3, 8, "pytorch-a10", "extension"),
    "Standard_NC24ads_A100_v4": ("A100", 1, 1, 80, "pytorch-cuda", "preinstalled"),
    "Standard_NC40ads_H100_v5": ("H100", 1, 1, 94, "pytorch-cuda", "preinstalled"),
}


@pytest.fixture
def catalog(cast, sim):
    for model in ("A10", "H100"):
        GpuQuota.objects.create(team=cast.team, gpu_model=model, gpus=2)
    return {e.slug: e for e in seed_demo_environments(now=NOW)}


def _offering(size):
    model, gpus, partition, memory, _, _ = FAMILIES[size]
    return OfferingFactory(
        vm_size=size,
        gpu_model=model,
        gpu_count=gpus,
        gpu_partition=partition,
        gpu_memory_gib=memory,
        price_per_hour=Decimal("1.0000"),
    )


def _request(cast, size, **kwargs):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="paper-run",
        offering=_offering(size),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        **kwargs,
    )


@pytest.mark.parametrize("size", sorted(FAMILIES))
def test_the_default_environment_of_each_family_sets_up_with_its_driver_method(
    cast, sim, catalog, size
):
    ws = Workspace.objects.get(pk=_request(cast, size).pk)
    _, _, _, _, slug, method = FAMILIES[size]
    # Up in Azure, with its driver; Running once its agent reports the layer and JupyterLab.
    assert (ws.status, ws.error_message) == (Status.SETTING_UP, "")
    assert ws.setup_step == "Setting up: waiting for the VM to report its environment setup"
    assert ws.environment.slug == slug
    assert ws.environment_recipe["driver_method"] == method
    assert ws.environment_recipe["vm_image"] == catalog[slug].vm_image
    name = f"ws-{ws.pk.hex[:12]}"
    vm = compute_client(azure_settings()).virtual_machines.get(
        azure_settings().resource_group, name
    )
    offer = vm.storage_profile.image_reference.offer
    assert offer == ("ubuntu-hpc" if method == "preinstalled" else "0001-com-ubuntu-server-jammy")
    extension = azure_extensions.get(azure_settings(), vm=name)
    if method == "extension":
        assert extension.succeeded and extension.exit_code == 0
    else:
        assert extension is None  # the image carries the driver


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("extension_no_gpu", "exit code 11 (NVIDIA GPU not found on this VM size)"),
        ("extension_size_unsupported", "exit code 13 (VM size not supported)"),
        ("extension_failed", "exit code 14 (Operation unsuccessful)"),
    ],
)
def test_a_failed_driver_extension_fails_the_workspace_with_azures_exit_code(
    cast, sim, catalog, fault, words
):
    sim.inject("vm.extension.create", fault)
    ws = Workspace.objects.get(pk=_request(cast, "Standard_NV12ads_A10_v5").pk)
    assert ws.status == Status.FAILED
    assert ws.error_code == "VMExtensionProvisioningError"
    assert words in ws.error_message
    # Nothing is left in Azure: Retry makes the VM again.
    assert not [v for v in sim.state()["virtualMachines"] if v["name"] == f"ws-{ws.pk.hex[:12]}"]


def test_a_throttled_extension_put_is_retried_and_the_driver_installs(cast, sim, catalog):
    sim.inject("vm.extension.create", "throttle", count=1, retry_after=0)
    ws = Workspace.objects.get(pk=_request(cast, "Standard_NV12ads_A10_v5").pk)
    assert ws.status == Status.SETTING_UP
    assert azure_extensions.get(azure_settings(), vm=f"ws-{ws.pk.hex[:12]}").succeeded


def test_an_environment_chosen_for_a_size_it_cannot_drive_is_refused(cast, sim, catalog):
    with pytest.raises(WorkspaceActionError, match="does not drive"):
        _request(cast, "Standard_NV12ads_A10_v5", environment=catalog["pytorch-cuda"])


def test_the_vm_gets_the_environments_image_and_layer(cast, sim, catalog):
    ws = Workspace.objects.get(
        pk=_request(cast, "Standard_NC24ads_A100_v4", environment=catalog["cuda-minimal"]).pk
    )
    vm = next(v for v in sim.state()["virtualMachines"] if v["name"] == f"ws-{ws.pk.hex[:12]}")
    document = json.loads(base64.b64decode(vm["customData"]).decode().split("\n", 1)[1])
    paths = {entry["path"] for entry in document["write_files"]}
    assert "/etc/systemd/system/gpu-portal-jupyter.service" in paths
    assert ws.environment_recipe["slug"] == "cuda-minimal"


def test_the_page_shows_the_recipe_and_makes_one_like_this(client, cast, sim, catalog):
    ws = _request(cast, "Standard_NV12ads_A10_v5")
    client.force_login(cast.researcher)
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert "PyTorch 2.5 on a fractional A10 (GRID)" in page
    assert "NvidiaGpuDriverLinux 1.6" in page and catalog["pytorch-a10"].vm_image in page
    like = (
        "/workspaces/new/?size=Standard_NV12ads_A10_v5&amp;region=eastus"
        "&amp;environment=pytorch-a10"
    )
    assert like in page
    form = client.get(like.replace("&amp;", "&")).content.decode()
    assert '<option value="pytorch-a10" selected>' in form


def test_the_api_takes_an_environment_by_slug(client, cast, sim, catalog):
    _offering("Standard_NC24ads_A100_v4")
    client.force_login(cast.researcher)
    body = {
        "kind": "vm",
        "team": "vision",
        "name": "from-api",
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
        "environment": "cuda-minimal",
    }
    key = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}
    created = client.post("/api/v1/workspaces", body, content_type="application/json", **key)
    assert created.status_code == 201, created.content
    assert Workspace.objects.get(name="from-api").environment.slug == "cuda-minimal"
    wrong = {**body, "name": "wrong", "environment": "pytorch-a10"}
    key = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}
    refused = client.post("/api/v1/workspaces", wrong, content_type="application/json", **key)
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["loc"] == ["body", "environment"]


def test_the_cli_lists_environments_and_requests_a_vm_with_one(live_server, cast, sim, catalog):
    token = api_token_create(
        user=cast.researcher, name="cli", scope="write", expires_in_days=1, now=timezone.now()
    )[1]
    run = CliRunner().invoke
    assert (
        run(app, ["login", "--url", live_server.url, "--token-stdin"], input=token).exit_code == 0
    )
    listed = run(app, ["environments", "--team", "vision", "--size", "Standard_NV12ads_A10_v5"])
    assert listed.exit_code == 0, listed.output
    assert "pytorch-a10" in listed.output and "extension" in listed.output
    assert "pytorch-cuda" not in listed.output
    _offering("Standard_NC24ads_A100_v4")
    args = ["request", "vm", "--team", "vision", "--name", "cli-vm", "--region", "eastus"]
    args += ["--size", "Standard_NC24ads_A100_v4", "--environment", "cuda-minimal"]
    args += ["--ssh-key", SSH_KEY]
    requested = run(app, args)
    assert requested.exit_code == 0, requested.output
    assert Workspace.objects.get(name="cli-vm").environment.slug == "cuda-minimal"
