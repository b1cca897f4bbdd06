"""The MIG slice backend: one pod (a StatefulSet of 1) in the team's namespace.

The pod requests one ``nvidia.com/mig-<profile>``, is pinned to its node pool, with a PVC for
/home and a Service. Its owner alone may port-forward to it, as the Entra ID identity of their
teams.models.Profile; the team's group has no rights in that namespace, which holds every
member's tokens. It counts slices/7 of a GPU against the team's quota and costs that share of
the node price. Its idle evidence is its agent's heartbeats, with DCGM's use of its MIG
instance merged in when PROMETHEUS_URL is set (idle_evidence). Errors raised: CloudError.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

from agent import cloud_init
from cloud import kube
from cloud.errors import CloudError
from clusters import selectors as cluster_selectors
from clusters.backends import mig_resize
from clusters.backends.aks import (
    AksBackend,
    aks_fields,
    kube_api,
    nfs_volumes,
    object_labels,
    pool_of,
)
from clusters.backends.jupyter import (
    DEFAULT_IMAGE,
    JUPYTER_PORT,
    image_fields,
    jupyter_token,
    vscode_target,
)
from clusters.backends.mig_rightsizing import mig_rightsizing_options
from clusters.dcgm import dcgm_pod_use_of, dcgm_use_read
from clusters.models import ClusterTeam, NodePool
from clusters.pool_room import pool_free_units
from common.words import with_article
from environments.models import Environment
from environments.recipes import vscode_password_hash
from teams.models import Profile, Team
from workspaces import telemetry
from workspaces.backends import (
    IdeTarget,
    KindForm,
    PoolUse,
    ResizeChoice,
    RightsizeOptions,
    SizingOffer,
    Step,
    Words,
    WorkspaceBackend,
    backend_for,
)
from workspaces.chains import Next
from workspaces.gpu_evidence import GpuReading, gpu_readings_record
from workspaces.gpus import SLICES_PER_GPU
from workspaces.hooks import ALL_MOUNTS, MountChoice
from workspaces.models import Workspace
from workspaces.requests import Ask, WorkspaceActionError, check_member, workspace_insert
from workspaces.states import Status
from workspaces.telemetry import ParsedSample

# A MIG slice's Kubernetes objects (its owner's Role and RoleBinding among them) may exist.
# A MIG pod holds its slice from the moment it is bound: running, or on its way down.
SLICE_BOUND = frozenset({Status.RUNNING, Status.STOPPING})
# On its way to a slice: created or started, not bound yet (possibly waiting for a free one).
SLICE_WAITING = frozenset({Status.REQUESTED, Status.PROVISIONING, Status.STARTING})
ACCESS_STATUSES = frozenset(
    {Status.PROVISIONING, Status.RUNNING, Status.STOPPING, Status.STOPPED, Status.STARTING}
)


class MigBackend(AksBackend):
    """Kind "mig" (see workspaces.backends.base.WorkspaceBackend)."""

    kind = "mig"
    label = "MIG slice"
    spend_colour = "#38a169"
    # A slice holds one MIG instance of its pool from the moment its pod is bound.
    # Its queued requests and starts wait in the fair queue for a free slice (scheduling.room).
    pool_use: PoolUse | None = PoolUse(
        holding=SLICE_BOUND, waiting=SLICE_WAITING, queue_for_room=True
    )
    delete_warning = "The pod, its Service and its /home volume"
    hand_over_note = "Port-forward to its pod is being moved to you."
    facts_template = "workspaces/kinds/mig_facts.html"
    connect_template = "workspaces/kinds/mig_connect.html"
    resizable = True
    price_note = (
        "A MIG slice costs its node's hourly price × slices ÷ (7 × GPUs per node) while running."
    )
    words = Words(
        idle_when="GPU under {threshold}%, no busy Jupyter kernel",
        # NVML has no utilisation counter per MIG device; without DCGM only the kernels count.
        idle_unmeasured="no busy Jupyter kernel; a MIG slice's GPU use is not measured here",
        readings_from="GPU readings unavailable in the pod",
        no_reading="No heartbeat from the agent in the pod yet.",
        sessions="Busy Jupyter kernels",
        cpu=True,
        waiting_for="Waiting for a free MIG slice",
        nothing_made="The portal checks again by itself; no pod has been created yet.",
    )
    finished = {
        "create": "Pod running on a {profile} MIG slice",
        "start": "Pod running on a {profile} MIG slice",
        "deallocate": "Scaled to 0; /home kept",
        "delete": "Pod, Service and /home volume deleted",
    }

    def __init__(self, form: KindForm) -> None:
        self.form = form

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """As every AKS kind's, and Resizing: a move to another profile (mig_resize)."""
        if workspace.status == Status.RESIZING:
            return mig_resize.resize_step(workspace, clock)
        return super().advance(workspace, clock)

    def resize_choices(self, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
        """The other MIG profiles of its cluster's ready pools (mig_resize)."""
        return mig_resize.mig_resize_choices(workspace)

    def what(self, workspace: Workspace) -> str:
        return f"the {workspace.mig_profile} pod {kube_name(workspace)}"

    def send(
        self, api: kube.KubeApi, workspace: Workspace, operation: str, now: datetime | None
    ) -> None:
        ns, name = workspace.namespace, kube_name(workspace)
        if operation == "create":
            if now is None:
                raise ValueError("A create is sent at a time: give now.")
            kube.mig_ensure(api, _mig_spec(workspace, now))
        elif operation == "delete":
            kube.mig_delete(api, namespace=ns, name=name)
        else:
            if operation == "start":  # Slices made before issue 14 get their owner's Role.
                kube.mig_access(api, slice_access(workspace))
            kube.mig_scale(api, namespace=ns, name=name, replicas=int(operation == "start"))

    def look(self, api: kube.KubeApi, workspace: Workspace, operation: str) -> Step:
        ns, name = workspace.namespace, kube_name(workspace)
        if operation == "delete":
            return Step(kube.mig_delete(api, namespace=ns, name=name))
        state = kube.mig_state(api, namespace=ns, name=name)
        if operation == "deallocate":
            return Step(state.phase == "Absent")
        if state.phase == "Running" and state.ready:
            return Step(True)
        if state.phase == "Pending" and state.reason == "Unschedulable":
            return Step(False, slice_waiting(api, workspace))
        if state.reason == "FailedCreate":
            return Step(False, f"Kubernetes refused the pod: {state.message}")
        return Step(False)

    def share(self, workspace: Workspace) -> tuple[int, int]:
        """slices / (7 x GPUs per node)."""
        return workspace.gpu_slices, SLICES_PER_GPU * pool_of(workspace).gpus_per_node

    def gpu_share(self, workspace: Workspace) -> Fraction:
        return Fraction(workspace.gpu_slices, SLICES_PER_GPU)

    def api_details(self, workspace: Workspace) -> dict[str, str | int | bool | None]:
        """Its container image and its sevenths of a GPU."""
        return {"image": workspace.image, "gpu_slices": workspace.gpu_slices}

    def size_label(self, workspace: Workspace) -> str:
        """The slice's GPU model and MIG profile ("A100 1g.10gb"), not its node's VM size."""
        return f"{workspace.gpu_model} {workspace.mig_profile}".strip()

    def ide_target(self, workspace: Workspace) -> IdeTarget | None:
        """JupyterLab behind the slice's Service ``<name>`` (cloud.kube_mig), by its cluster
        DNS name: the portal runs in the cluster (docs/operations.md, "The app proxy")."""
        if workspace.status != Status.RUNNING or not workspace.namespace:
            return None
        host = f"{kube_name(workspace)}.{workspace.namespace}.svc.cluster.local"
        vscode = vscode_target(workspace, host)
        return IdeTarget(host, JUPYTER_PORT, jupyter_token(workspace), vscode=vscode)

    def detail_context(self, workspace: Workspace, user: User | AnonymousUser) -> dict[str, object]:
        """For its owner, whether they gave no Entra ID identity (then nobody may port-forward
        to the pod). No JupyterLab token: the app proxy adds it, no page shows it."""
        context: dict[str, object] = {}
        if workspace.owner_id == user.pk and isinstance(user, User):
            context["entra_missing"] = not owner_users(user)
        return context

    def access_to_refresh(self, *, owner: User) -> list[UUID]:
        """Its owner's slices whose objects may exist."""
        return list(
            Workspace.objects.filter(
                owner=owner, kind=self.kind, status__in=ACCESS_STATUSES
            ).values_list("pk", flat=True)
        )

    def access_refresh(self, workspace: Workspace) -> None:
        """The slice's owner Role and RoleBinding made to name its owner's identity now
        (nothing for a slice gone or not yet made). Raises CloudError."""
        if workspace.status in ACCESS_STATUSES:
            kube.mig_access(kube_api(pool_of(workspace)), slice_access(workspace))

    def idle_evidence(self, now: datetime) -> list[tuple[UUID, list[ParsedSample]]]:
        """No samples of its own: the agent in the pod reports. With PROMETHEUS_URL
        (clusters.dcgm), what DCGM sees of each running slice's MIG instance at ``now``
        (DCGM_FI_PROF_GR_ENGINE_ACTIVE as percent, DCGM_FI_DEV_FB_USED in MiB) is recorded
        for merging into its agent's samples (workspaces.gpu_evidence): NVML has no
        utilisation counter per MIG device. Without it, or with Prometheus failing, the
        agent's samples count alone. Returns []."""
        use = dcgm_use_read(now=now)
        if use is None:
            return []
        readings = {}
        running = Workspace.objects.filter(kind=self.kind, status=Status.RUNNING)
        for workspace in running.select_related("node_pool__cluster"):
            seen = dcgm_pod_use_of(
                use,
                cluster=pool_of(workspace).cluster.name,
                namespace=workspace.namespace,
                pod=f"{kube_name(workspace)}-0",  # A StatefulSet's one pod.
            )
            if seen is not None:
                readings[workspace.pk] = GpuReading(now, seen.gpu_util, seen.fb_used_mib)
        gpu_readings_record(readings=readings)
        return []

    def rightsizing_options(self, *, regions: set[str]) -> RightsizeOptions:
        """The MIG profiles of the ready MIG pools each team may use (mig_rightsizing)."""
        return mig_rightsizing_options(kind=self.kind, regions=regions)

    def sizing_offers(self, *, team: Team | None) -> list[SizingOffer]:
        """The MIG profiles the team's ready pools serve (cluster_selectors.mig_choices: per
        profile and GPU model, the pool a request would be placed on), in its cluster's
        region, at the slice's share of the node price. Memory per instance is the profile's
        (NVIDIA's MIG user guide names it: "1g.10gb" holds 10 GB). None without a team."""
        if team is None:
            return []
        return [
            SizingOffer(
                kind=self.kind,
                name=f"{c.gpu_model} {c.profile}",
                vm_size=c.pool.vm_size,
                mig_profile=c.profile,
                region=c.pool.cluster.location,
                gpu_model=c.gpu_model,
                gpus=1,
                gpu_memory_gib=Decimal(c.memory_gib),
                gpu_share=c.gpu_share,
                price_per_hour=c.price_per_hour,
                suits=c.suits,
            )
            for c in cluster_selectors.mig_choices(team=team)
        ]


def kube_name(workspace: Workspace) -> str:
    """Name of a MIG workspace's StatefulSet, Service and PVC prefix: "ws-<12 hex>"."""
    return f"ws-{workspace.short_id}"


def slice_waiting(api: kube.KubeApi, workspace: Workspace) -> str:
    """Why a MIG pod is Pending, from the cluster's own count, and which profiles the team
    could take now instead: "Waiting for a free 1g.10gb slice (0 of 7 free on pool mig1g).
    Free now: 3g.40gb (2)." Raises CloudError."""
    pool = pool_of(workspace)
    resource = f"nvidia.com/mig-{workspace.mig_profile}"
    lines = [c for c in kube.pool_capacity(api) if c.pool == pool.name and c.resource == resource]
    total = sum(c.total for c in lines)
    free = max(0, total - sum(c.used for c in lines))
    text = (
        f"Waiting for a free {workspace.mig_profile} slice ({free} of {total} free on pool "
        f"{pool.name}); it starts by itself when one frees up."
    )
    others = [
        f"{c.profile} ({c.free})"
        for c in cluster_selectors.mig_choices(team=workspace.team)
        if c.free and c.profile != workspace.mig_profile
    ]
    if others:
        text += f" Free now: {', '.join(others)}; delete this one and ask for another."
    return text


def _mig_spec(workspace: Workspace, now: datetime) -> kube.MigSpec:
    pool = pool_of(workspace)
    return kube.MigSpec(
        workspace_id=str(workspace.pk),
        namespace=workspace.namespace,
        name=kube_name(workspace),
        image=workspace.image or DEFAULT_IMAGE,
        mig_profile=workspace.mig_profile,
        pool_name=pool.name,
        tolerations=tuple(pool.taints),
        env=(
            ("GPU_PORTAL_URL", settings.PORTAL_URL),
            ("GPU_PORTAL_WORKSPACE", str(workspace.pk)),
            # "%g": a demo's 0.5 s must not become "0", which the agent refuses.
            ("GPU_PORTAL_INTERVAL_SECONDS", f"{settings.AGENT_INTERVAL_SECONDS:g}"),
        ),
        agent_token=telemetry.agent_token_issue(workspace_id=workspace.pk, now=now),
        labels=object_labels(workspace),
        # The agent runs in the pod on its MIG device, as cloud-init runs it on a VM.
        agent_script=cloud_init.agent_source(),
        agent_requirement=cloud_init.nvml_requirement(),
        owner_users=owner_users(workspace.owner),
        jupyter_token=jupyter_token(workspace),
        nfs=nfs_volumes(workspace),
        vscode_password_hash=vscode_password_hash(workspace.pk),
    )


def owner_users(user: User) -> tuple[str, ...]:
    """The Kubernetes user names of the user's Entra ID identity (teams.models.Profile), () when
    they gave none: their slices' pods then let nobody port-forward."""
    profile = Profile.objects.filter(user=user).first()
    return profile.kubernetes_users if profile else ()


def slice_access(workspace: Workspace) -> kube.SliceAccess:
    """Who may reach the MIG workspace's pod: its owner, by their Entra ID identity."""
    return kube.SliceAccess(
        workspace_id=str(workspace.pk),
        namespace=workspace.namespace,
        name=kube_name(workspace),
        users=owner_users(workspace.owner),
        labels=object_labels(workspace),
    )


# --- requests ---------------------------------------------------------------------------


def workspace_request_mig(
    *,
    user: User,
    team: Team,
    name: str,
    profile: str,
    gpu_model: str,
    request_key: UUID,
    now: datetime,
    image: str = "",
    environment: Environment | None = None,
    justification: str = "",
    mounts: MountChoice = ALL_MOUNTS,
    queue_when_full: bool = False,
) -> Workspace:
    """Ask for one MIG slice of ``profile`` ("1g.10gb") on a ``gpu_model`` GPU, placed on the
    team's ready pool serving it with the most free instances. It counts slices/7 of a GPU
    against the team's quota of that model, and costs that share of the node price (USD/hour).
    Its container runs ``image`` when given (the researcher's own, pinned), else
    ``environment``'s image, else the team's default container environment's (recorded on the
    workspace, environments.recipes), else DEFAULT_IMAGE.
    Raises WorkspaceActionError when no pool on the team's clusters serves the profile, and
    JustificationNeeded above quota without a reason; ``mounts`` as workspace_insert takes it
    (MountRefused). With ``queue_when_full``, a request above the team's GPU quota alone, or
    for a pool with no free slice of the profile now (clusters.pool_room: one Kubernetes
    read), waits in the fair queue (status queued) instead of asking for approval or waiting
    Pending on the pool; without it, a full pool's slice is made and waits there."""
    check_member(user=user, team=team)
    choice = next(
        (
            c
            for c in cluster_selectors.mig_choices(team=team)
            if c.profile == profile and c.gpu_model == gpu_model
        ),
        None,
    )
    if choice is None:
        raise WorkspaceActionError(
            f"No node pool offers {gpu_model} {profile} slices to {team.name}; "
            "choose another profile or ask a platform admin."
        )
    link = ClusterTeam.objects.get(cluster_id=choice.pool.cluster_id, team=team)
    fields = aks_fields(choice.pool, name, choice.price_per_hour, MigBackend.kind)
    fields.update(
        mig_profile=profile,
        gpu_slices=choice.slices,
        namespace=link.namespace,
        **image_fields(team, MigBackend.kind, image.strip(), environment),
    )
    slice_name = f"{with_article(gpu_model)} {profile} MIG slice"
    reason = f"Requested {slice_name} on node pool {choice.pool.name}"
    gpus = Fraction(choice.slices, SLICES_PER_GPU)
    no_room = _no_free_slice(choice.pool, profile) if queue_when_full else ""
    ask = Ask(
        user,
        team,
        request_key,
        fields,
        gpus,
        reason,
        queue_when_full=queue_when_full,
        no_room=no_room,
        mounts=mounts,
    )
    return workspace_insert(ask=ask, justification=justification, now=now)


def _no_free_slice(pool: NodePool, profile: str) -> str:
    """Why ``pool`` has no room for one more ``profile`` slice now, "" when it has."""
    if pool_free_units(pool_ids=[pool.pk]).get(pool.pk, 0) > 0:
        return ""
    return (
        f"Waiting in the queue for a free {profile} slice on pool {pool.name}; it starts by "
        "itself in the fair order when one frees up."
    )


def slice_access_refresh_all() -> dict[str, str]:
    """Refresh the owner access of every MIG workspace whose objects may exist, in place (an
    operator's command after upgrading: the team's old edit binding goes from every slices'
    namespace). Returns {workspace id: "ok" or the CloudError's words}."""
    backend = backend_for(MigBackend.kind)
    done = {}
    for workspace in Workspace.objects.filter(
        kind=MigBackend.kind, status__in=ACCESS_STATUSES
    ).select_related("node_pool", "owner", "team"):
        try:
            backend.access_refresh(workspace)
            done[str(workspace.pk)] = "ok"
        except CloudError as exc:
            done[str(workspace.pk)] = f"{exc.code}: {exc.message}"
    return done


# mypy checks the class against the protocol, signatures included (a runtime_checkable
# isinstance compares only names).
_PROTOCOL_CHECKED: type[WorkspaceBackend] = MigBackend
