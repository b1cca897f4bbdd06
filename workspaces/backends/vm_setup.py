"""Setting up a GPU VM after Azure created it: the NVIDIA GPU Driver Extension, when the
workspace's environment installs its driver that way (environments.recipes). The VM backend
calls ``driver_step`` once the create has succeeded and before it moves the workspace on to
Running: Running means the driver is there (docs/environments.md, "From request to Ready").
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cloud import azure_extensions
from cloud.errors import CloudError
from environments.recipes import vm_recipe
from workspaces.azure import azure_settings
from workspaces.chains import Next
from workspaces.models import Workspace

INSTALLING = "Setting up: the NVIDIA GPU Driver Extension is installing the {family} driver"


def driver_step(workspace: Workspace, vm_name: str, clock: Callable[[], datetime]) -> Next | None:
    """None when the VM's driver is there (the image carries it, or the extension succeeded):
    go on to Running. Next.POLL while the extension installs (sent here the first time; the
    step is written to ``setup_step``). Raises CloudError: Azure's refusal, or the extension's
    failure (permanent, code VMExtensionProvisioningError, with its exit code and message)."""
    recipe = vm_recipe(workspace.environment_recipe or {})
    if recipe is None or recipe.extension_settings is None:
        return None
    azure = azure_settings()
    state = azure_extensions.get(azure, vm=vm_name)
    if state is None:
        azure_extensions.put(
            azure, vm=vm_name, location=workspace.region, settings=recipe.extension_settings
        )
    elif state.succeeded:
        Workspace.objects.filter(pk=workspace.pk).update(setup_step="")
        return None
    elif state.failed:
        meaning = f" ({state.meaning})" if state.meaning else ""
        raise CloudError(
            "VMExtensionProvisioningError",
            f"The NVIDIA GPU Driver Extension failed with exit code {state.exit_code}{meaning}: "
            f"{state.message}".strip(),
        )
    step = INSTALLING.format(family=recipe.gpu_family or "GPU")
    Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
        setup_step=step, updated_at=clock()
    )
    return Next.POLL
