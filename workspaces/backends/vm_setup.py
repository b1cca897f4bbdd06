"""Setting up a GPU VM that Azure created from an environment (Status.SETTING_UP), until the
researcher can work (docs/environments.md, "From request to Ready"):

1. the NVIDIA driver: the NVIDIA GPU Driver Extension when the environment installs it that way
   (environments.recipes), polled through Azure; else the image's own driver, which the VM's
   agent reports loaded;
2. the environment layer (agent/environment_init.py): its steps, as the agent reports them in
   its heartbeats, until "done: succeeded";
3. JupyterLab answering the agent on the workspace's private address.

Then Running. A failed extension fails the workspace with Azure's message (a CloudError:
workspaces.operations deletes the VM); a failed layer step with the log's last lines, and a
setup still not ready after SETUP_TIMEOUT_MINUTES likewise. Retry makes the VM again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from cloud import azure_extensions
from cloud.errors import CloudError
from environments.recipes import VmRecipe, vm_recipe
from workspaces import states
from workspaces.azure import azure_settings
from workspaces.chains import Next
from workspaces.models import Workspace, WorkspaceAgent
from workspaces.states import Status

INSTALLING = "the NVIDIA GPU Driver Extension is installing the {family} driver"
WAITING_DRIVER = "waiting for the image's NVIDIA driver to answer"
WAITING_AGENT = "waiting for the VM to report its environment setup"
STARTING_JUPYTER = "starting JupyterLab on the private address"
# The layer's steps (agent/environment_init.setup_script) as the page says them.
STEP_WORDS = {
    "packages": "installing the environment's packages",
    "conda": "creating the conda environment",
    "python": "creating the Python environment",
    "pip": "installing the pip requirements",
    "jupyterlab": "installing JupyterLab",
    "vscode": "installing VS Code (code-server)",
    "dotfiles": "running your dotfiles",
    "personal": "running your setup script",
    "done": STARTING_JUPYTER,
}


@dataclass(frozen=True)
class AgentSays:
    """What the VM's agent last reported of the setup (WorkspaceAgent)."""

    driver: str = ""
    setup: str = ""  # "step: state"
    setup_log: tuple[str, ...] = ()
    jupyter: str = ""

    @property
    def failed_step(self) -> str:
        step, _, state = self.setup.partition(": ")
        return step if state == "failed" else ""

    @property
    def layer_done(self) -> bool:
        return self.setup == "done: succeeded"


def needs_setup(workspace: Workspace) -> bool:
    """Whether a created VM sets up before Running: one made from an environment."""
    return vm_recipe(workspace.environment_recipe or {}) is not None


def setup_advance(
    workspace: Workspace,
    *,
    vm_name: str,
    clock: Callable[[], datetime],
    clean_up: Callable[[Workspace], None],
) -> Next:
    """One look at a setting-up VM: POLL while the driver extension installs, SETUP while the
    agent has not reported the layer done and JupyterLab answering, DONE once it is Running or
    Failed. ``clean_up`` deletes the VM of a failed setup. Raises CloudError (Azure's refusal
    or the extension's failure, permanent: workspaces.operations fails the workspace)."""
    recipe = vm_recipe(workspace.environment_recipe or {})
    if recipe is None:
        return _ready(workspace, clock(), "VM is running")
    if clock() >= _deadline(workspace):
        return _fail(workspace, _timed_out(workspace), clock, clean_up)
    if recipe.extension_settings is not None and not _driver_installed(workspace, vm_name, recipe):
        _show_step(workspace, INSTALLING.format(family=recipe.gpu_family or "GPU"), clock())
        return Next.POLL
    says = _agent_says(workspace)
    if says.failed_step:
        return _fail(workspace, _layer_failed(says), clock, clean_up)
    waiting = _waiting_for(says, recipe)
    if waiting:
        _show_step(workspace, waiting, clock())
        return Next.SETUP
    return _ready(workspace, clock(), _ready_reason(recipe))


def _driver_installed(workspace: Workspace, vm_name: str, recipe: VmRecipe) -> bool:
    """Sends the extension the first time; True once Azure says it succeeded. Raises
    CloudError when it failed (code VMExtensionProvisioningError, its exit code and message)."""
    azure = azure_settings()
    state = azure_extensions.get(azure, vm=vm_name)
    if state is None:
        azure_extensions.put(
            azure, vm=vm_name, location=workspace.region, settings=recipe.extension_settings or {}
        )
        return False
    if state.failed:
        meaning = f" ({state.meaning})" if state.meaning else ""
        raise CloudError(
            "VMExtensionProvisioningError",
            f"The NVIDIA GPU Driver Extension failed with exit code {state.exit_code}{meaning}: "
            f"{state.message}".strip(),
        )
    return state.succeeded


def _agent_says(workspace: Workspace) -> AgentSays:
    row = (
        WorkspaceAgent.objects.filter(pk=workspace.pk)
        .values("driver", "setup", "setup_log", "jupyter")
        .first()
    )
    if row is None:
        return AgentSays()
    return AgentSays(row["driver"], row["setup"], tuple(row["setup_log"] or ()), row["jupyter"])


def _waiting_for(says: AgentSays, recipe: VmRecipe) -> str:
    """What the setup still waits for, in the page's words; "" when ready."""
    if not says.setup:
        return WAITING_AGENT
    if recipe.extension_settings is None and says.driver != "loaded":
        return WAITING_DRIVER
    if not says.layer_done:
        step = says.setup.partition(": ")[0]
        return STEP_WORDS.get(step, f"running the {step} step")
    return "" if says.jupyter == "answers" else STARTING_JUPYTER


def _show_step(workspace: Workspace, step: str, now: datetime) -> None:
    # A fresh updated_at also tells the reconcile sweep that this workspace is looked after.
    Workspace.objects.filter(pk=workspace.pk, status=Status.SETTING_UP).update(
        setup_step=f"Setting up: {step}", updated_at=now
    )


def _ready(workspace: Workspace, now: datetime, reason: str) -> Next:
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.SETTING_UP,
        to=Status.RUNNING,
        now=now,
        reason=reason,
        setup_step="",
    )
    return Next.DONE


def _ready_reason(recipe: VmRecipe) -> str:
    driver = (
        "the NVIDIA GPU Driver Extension succeeded"
        if recipe.extension_settings is not None
        else "the image's NVIDIA driver answers"
    )
    return f"Ready: {driver}, the environment is set up and JupyterLab answers"


def _deadline(workspace: Workspace) -> datetime:
    return workspace.status_changed_at + timedelta(minutes=settings.SETUP_TIMEOUT_MINUTES)


@dataclass(frozen=True)
class _Failure:
    code: str
    message: str
    reason: str


def _layer_failed(says: AgentSays) -> _Failure:
    step = says.failed_step
    lines = "\n".join(says.setup_log) or "(the agent sent no log lines)"
    return _Failure(
        "EnvironmentSetupFailed",
        f"The environment's {step} step failed. The last lines of /var/log/gpu-portal-env.log:"
        f"\n{lines}",
        f"The environment's setup failed at the {step} step",
    )


def _timed_out(workspace: Workspace) -> _Failure:
    minutes = settings.SETUP_TIMEOUT_MINUTES
    step = workspace.setup_step.removeprefix("Setting up: ") or "its first step"
    return _Failure(
        "EnvironmentSetupTimedOut",
        f"The VM was not ready {minutes} minutes after Azure created it; it was at: {step}.",
        f"Not ready within {minutes} minutes of setting up",
    )


def _fail(
    workspace: Workspace,
    failure: _Failure,
    clock: Callable[[], datetime],
    clean_up: Callable[[Workspace], None],
) -> Next:
    """Delete the VM (nothing left billing; Retry makes it again), then fail the workspace
    with what went wrong. Raises CloudError when the delete meets a transient error: the
    chain retries the whole look."""
    clean_up(workspace)
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.SETTING_UP,
        to=Status.FAILED,
        now=clock(),
        reason=failure.reason,
        detail={"code": failure.code, "message": failure.message},
        operation="",
        operation_token="",
        setup_step="",
        error_code=failure.code,
        error_message=failure.message,
        failed_operation="setup",
    )
    return Next.DONE
